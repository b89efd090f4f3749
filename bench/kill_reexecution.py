"""Activities executed again per engine kill: the reference worker on the reference sidecar and on
durabletask-go, the same workload and the same kills.

Workload: the reference worker (`python -m fake_worker`, its own process) runs N instances of a
chain of 5 `record` activities (each run appends a line to a ledger file). While they run, the
engine is killed with kill -9 K times, each time as soon as it serves again plus a pause, and
restarted on the same db and port; the worker reconnects by itself. Then every instance must
complete. Re-executions = ledger lines - distinct (instance, task id); they are printed per kill.

    ./dev bench kill_reexecution [--instances 100] [--kills 5] [--pause 1.0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conformance.targets.durabletask_go import DEFAULT_BINARY as DTGO_BINARY  # noqa: E402
from conformance.targets.process import ManagedProcess, ProcessSpec, free_port  # noqa: E402
from taskhub_wire import pb  # noqa: E402
from taskhub_wire.rpc import TASKHUB, TaskHubClient  # noqa: E402

STEPS = 5
BUNDLE = {"programs": {"chain5": {"steps": [
    *({"call_activity": {"name": "record", "input": f"step-{i}"}} for i in range(STEPS)),
    {"return": "done"}]}}}


@dataclass(frozen=True)
class EngineSpec:
    label: str
    argv: Callable[[int, Path], tuple[str, ...]]


ENGINES = (
    EngineSpec("reference (sqlite)",
               lambda port, db: (sys.executable, "-m", "fake_sidecar", "--port", str(port), "--db", str(db))),
    EngineSpec("durabletask-go (sqlite)",
               lambda port, db: (str(DTGO_BINARY), "-host", "127.0.0.1", "-port", str(port), "-db", str(db))),
)


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as ch:
        try:
            ch.unary_unary(TASKHUB.method("Hello").path)(b"", timeout=1.0)
            return True
        except grpc.RpcError:
            return False


def _launch(spec: EngineSpec, port: int, db: Path, logs: Path) -> ManagedProcess:
    """Start on `port`; a port still held by the killed process is retried for a while."""
    deadline = time.monotonic() + 60
    while True:
        proc = ManagedProcess.start(spec=ProcessSpec(name=spec.label.split()[0], argv=spec.argv(port, db),
                                                     log_dir=logs, cwd=ROOT))
        while proc.is_running() and not _serving(f"127.0.0.1:{port}"):
            time.sleep(0.02)
        if proc.is_running():
            return proc
        if time.monotonic() > deadline:
            raise RuntimeError(f"{spec.label} did not start:\n{proc.stderr_tail()}")
        time.sleep(0.2)


def run(spec: EngineSpec, *, instances: int, kills: int, pause: float, tmp: Path) -> dict:
    db, ledger, bundle = tmp / f"{spec.label.split()[0]}.db", tmp / f"{spec.label.split()[0]}.ledger", tmp / "b.json"
    bundle.write_text(json.dumps(BUNDLE))
    port = free_port()
    address = f"127.0.0.1:{port}"
    engine = _launch(spec, port, db, tmp)
    worker = ManagedProcess.start(spec=ProcessSpec(
        name="fake-worker", argv=(sys.executable, "-m", "fake_worker", "--sidecar", address, "--programs", str(bundle),
                                  "--ledger", str(ledger), "--connect-timeout", "60"), log_dir=tmp, cwd=ROOT))
    ids = [f"kill-{i}" for i in range(instances)]
    try:
        def start_all() -> None:
            with grpc.insecure_channel(address) as ch:
                client = TaskHubClient(ch)
                for iid in ids:
                    while True:
                        try:
                            client.call("StartInstance", pb.CreateInstanceRequest(instanceId=iid, name="chain5"),
                                        timeout=10, wait_for_ready=True)
                            break
                        except grpc.RpcError as exc:
                            if exc.code() == grpc.StatusCode.ALREADY_EXISTS:
                                break
                            time.sleep(0.1)

        starter = threading.Thread(target=start_all, daemon=True)
        starter.start()
        down = 0.0
        for _ in range(kills):
            time.sleep(pause)
            engine.kill()
            began = time.perf_counter()
            engine = _launch(spec, port, db, tmp)
            down += time.perf_counter() - began
        starter.join(300)
        deadline = time.monotonic() + 600
        with grpc.insecure_channel(address) as ch:
            client = TaskHubClient(ch)
            for iid in ids:
                while True:
                    try:
                        st = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid), timeout=10)
                        if st.exists and st.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED:
                            break
                    except grpc.RpcError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{spec.label}: {iid} did not complete")
                    time.sleep(0.05)
    finally:
        worker.stop()
        engine.stop()
    lines = [json.loads(ln) for ln in ledger.read_text().splitlines() if ln.strip()]
    distinct = {(ln["instance_id"], ln["task_id"]) for ln in lines}
    return {"runs": len(lines), "distinct": len(distinct), "expected": instances * STEPS,
            "down_s": down / kills}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--pause", type=float, default=1.0, help="seconds of serving between kills")
    args = ap.parse_args()
    if not DTGO_BINARY.exists():
        print("bench: durabletask-go is not installed; run scripts/install-durabletask-go.sh", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-kill-") as tmp:
        for spec in ENGINES:
            res = run(spec, instances=args.instances, kills=args.kills, pause=args.pause, tmp=Path(tmp))
            print(f"  {spec.label}: {res}", file=sys.stderr, flush=True)
            rows.append((spec.label, res))
    print(f"\nreference worker, {args.instances} instances x {STEPS} activities, {args.kills} kill -9 of the engine\n")
    print(f"{'engine':<26} {'runs':>6} {'distinct':>9} {'re-runs':>8} {'per kill':>9} {'re-run %':>9} {'down s':>7}")
    for label, r in rows:
        extra = r["runs"] - r["distinct"]
        print(f"{label:<26} {r['runs']:>6} {r['distinct']:>9} {extra:>8} {extra / args.kills:>9.1f} "
              f"{100 * extra / r['distinct']:>8.1f}% {r['down_s']:>7.2f}")
        if r["distinct"] != r["expected"]:
            print(f"  {label}: {r['expected'] - r['distinct']} activities never ran", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
