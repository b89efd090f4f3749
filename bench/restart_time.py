"""Restart time: the reference sidecar against durabletask-go on databases of the same size.

Each engine (its own process, SQLite) first fills its database with a dapr-ext-workflow 1.18.3
worker: N instances of a workflow that starts T timers due at once and waits for them all
(bench/apps/dx_timers.py; about 2T+3 history events each: 1,000 x 49 timers is ~100,000 events).
Then, R times: kill -9 the engine, start it again on the same db, and time from the start of the
process until GetInstance of a stored instance answers `exists` (a fresh channel per attempt, every
10 ms). Also prints the resident memory (VmRSS) at that point.

    ./dev bench restart_time [--instances 1000] [--timers 49] [--restarts 5] [--dir DIR]

--dir keeps the databases in DIR and reuses those already there (to compare builds on one db).
The machine's load average is printed: a loaded machine slows the Python engine's start most.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
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
from taskhub_wire.rpc import TASKHUB  # noqa: E402

DX_PYTHON = ROOT / ".sdk" / "dx" / "bin" / "python"


@dataclass(frozen=True)
class EngineSpec:
    label: str
    argv: Callable[[int, Path], tuple[str, ...]]
    history_table: str  # where the engine keeps history rows, to count them


ENGINES = (
    EngineSpec("reference (sqlite)",
               lambda port, db: (sys.executable, "-m", "fake_sidecar", "--port", str(port), "--db", str(db)),
               "history"),
    EngineSpec("durabletask-go (sqlite)",
               lambda port, db: (str(DTGO_BINARY), "-host", "127.0.0.1", "-port", str(port), "-db", str(db)),
               "History"),
)


def _start(spec: EngineSpec, db: Path, log_dir: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    proc = ManagedProcess.start(spec=ProcessSpec(name=spec.label.split()[0], argv=spec.argv(port, db),
                                                 log_dir=log_dir, cwd=ROOT))
    return proc, f"127.0.0.1:{port}"


def _serves(address: str, iid: str) -> bool:
    with grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)]) as ch:
        call = ch.unary_unary(TASKHUB.method("GetInstance").path,
                              response_deserializer=pb.GetInstanceResponse.FromString)
        try:
            return call(pb.GetInstanceRequest(instanceId=iid).SerializeToString(), timeout=1.0).exists
        except grpc.RpcError:
            return False


def _wait_serving(proc: ManagedProcess, address: str, iid: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not _serves(address, iid):
        if not proc.is_running():
            raise RuntimeError(f"the engine exited ({proc.returncode}):\n{proc.stderr_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the engine did not serve {iid} within {timeout}s")
        time.sleep(0.01)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _fill(spec: EngineSpec, db: Path, log_dir: Path, instances: int, timers: int) -> int:
    proc, address = _start(spec, db, log_dir)
    try:
        _wait_serving_hello(proc, address)
        out = subprocess.run([str(DX_PYTHON), str(ROOT / "bench" / "apps" / "dx_timers.py"), "--address", address,
                              "--instances", str(instances), "--timers", str(timers)],
                             capture_output=True, text=True, timeout=1800)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if out.returncode != 0 or not lines or json.loads(lines[-1])["completed"] != instances:
            raise RuntimeError(f"{spec.label}: filling the db failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    finally:
        proc.stop()
    return _count(spec, db)


def _count(spec: EngineSpec, db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute(f"SELECT count(*) FROM {spec.history_table}").fetchone()[0])
    finally:
        con.close()


def _wait_serving_hello(proc: ManagedProcess, address: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        with grpc.insecure_channel(address) as ch:
            try:
                ch.unary_unary(TASKHUB.method("Hello").path)(b"", timeout=1.0)
                return
            except grpc.RpcError:
                pass
        if not proc.is_running() or time.monotonic() > deadline:
            raise RuntimeError(f"the engine did not start:\n{proc.stderr_tail()}")
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--timers", type=int, default=49)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None, help="keep (and reuse) the databases here")
    args = ap.parse_args()
    if not DX_PYTHON.exists():
        print("bench: dapr-ext-workflow is not installed; run scripts/install-sdks.sh dx", file=sys.stderr)
        return 2
    if not DTGO_BINARY.exists():
        print("bench: durabletask-go is not installed; run scripts/install-durabletask-go.sh", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        keep = args.dir or Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        for spec in ENGINES:
            db = keep / f"{spec.label.split()[0]}-{args.instances}x{args.timers}.db"
            began = time.perf_counter()
            events = _count(spec, db) if db.exists() else _fill(spec, db, Path(tmp), args.instances, args.timers)
            print(f"  {spec.label}: {args.instances} instances, {events} history events "
                  f"(filled in {time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
            times, rss = [], []
            for _ in range(args.restarts):
                iid = f"restart-{random.randrange(args.instances)}"
                t0 = time.perf_counter()
                proc, address = _start(spec, db, Path(tmp))
                try:
                    _wait_serving(proc, address, iid)
                    times.append(time.perf_counter() - t0)
                    rss.append(_rss_mb(proc.pid))
                finally:
                    proc.kill()  # kill -9: the next start recovers from a crash, as after a real one
            rows.append((spec.label, events, times, rss))
            print(f"  {spec.label}: restarts {', '.join(f'{t:.2f}' for t in times)} s", file=sys.stderr, flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nrestart after kill -9, {args.instances} instances, best/median/worst of {args.restarts}; "
          f"time from process start until GetInstance answers; load average {load} on {os.cpu_count()} cores\n")
    print(f"{'engine':<26} {'events':>8} {'best s':>8} {'median s':>9} {'worst s':>8} {'RSS MB':>7}")
    for label, events, times, rss in rows:
        print(f"{label:<26} {events:>8} {min(times):>8.2f} {statistics.median(times):>9.2f} {max(times):>8.2f} "
              f"{statistics.median(rss):>7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
