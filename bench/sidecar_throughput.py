"""Sidecar throughput: the reference sidecar (SQLite and memory) against durabletask-go and daprd, same workload.

Workload: a dapr-ext-workflow 1.18.3 worker (its own process) runs a 3-activity chain; N instances
are started concurrently by 16 client threads and awaited. Each instance is 4 workflow turns and 3
activities, i.e. 7 work-item round trips. Every engine runs as its own process on loopback (daprd with its placement and scheduler).

    ./dev bench sidecar_throughput [--instances 200] [--repeat 1]

Prints completed workflows/s and work-item round trips/s per engine and each rate's ratio to
durabletask-go's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conformance.targets.daprd import DaprdSidecar  # noqa: E402
from conformance.targets.durabletask_go import DurableTaskGoSidecar  # noqa: E402
from conformance.targets.process import ManagedProcess, ProcessSpec  # noqa: E402

DX_PYTHON = ROOT / ".sdk" / "dx" / "bin" / "python"
ROUND_TRIPS_PER_INSTANCE = 7


def run_load(address: str, instances: int) -> dict:
    out = subprocess.run([str(DX_PYTHON), str(ROOT / "bench" / "apps" / "dx_chain.py"), "--address", address,
                          "--instances", str(instances)], capture_output=True, text=True, timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"load app failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


class _Ours:
    """The reference sidecar as its own process, like durabletask-go."""

    def __init__(self, db: str, log_dir: Path) -> None:
        self.proc = ManagedProcess.start(spec=ProcessSpec(
            name=f"fake-sidecar-{'memory' if db == ':memory:' else 'sqlite'}",
            argv=(sys.executable, "-m", "fake_sidecar", "--port", "0", "--db", db), log_dir=log_dir, cwd=ROOT))
        self.address = self.proc.wait_for_line(r"^listening on (\S+)", timeout=30).group(1)

    def stop(self) -> None:
        self.proc.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine; the best is reported")
    args = ap.parse_args()
    if not DX_PYTHON.exists():
        print("bench: dapr-ext-workflow is not installed; run scripts/install-sdks.sh dx", file=sys.stderr)
        return 2
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        log_dir = Path(tmp)
        engines = [
            ("reference (sqlite)", lambda: _Ours(str(log_dir / "ref.db"), log_dir)),
            ("reference (memory)", lambda: _Ours(":memory:", log_dir)),
            ("durabletask-go (sqlite)", lambda: DurableTaskGoSidecar().start(log_dir=log_dir)),
            # One daprd (its own app id and SQLite actor store) under the shared placement and scheduler.
            ("daprd (sqlite)", lambda: DaprdSidecar(options={}, work_dir=Path(tempfile.mkdtemp(dir=log_dir)))),
        ]
        for label, start in engines:
            best = 0.0
            for _ in range(args.repeat):
                server = start()
                try:
                    res = run_load(server.address, args.instances)
                finally:
                    server.stop()
                if res["completed"] != args.instances:
                    print(f"bench: {label}: only {res['completed']} of {args.instances} completed", file=sys.stderr)
                    return 1
                best = max(best, res["instances"] / res["elapsed_s"])
            results[label] = best
            print(f"  {label}: {best:.1f} workflows/s", file=sys.stderr, flush=True)
    base = results["durabletask-go (sqlite)"]
    print(f"\n3-activity chain, {args.instances} instances, dapr-ext-workflow 1.18.3 worker, best of {args.repeat}\n")
    print(f"{'engine':<26} {'workflows/s':>12} {'round trips/s':>14} {'vs durabletask-go':>18}")
    for label, rate in results.items():
        print(f"{label:<26} {rate:>12.1f} {rate * ROUND_TRIPS_PER_INSTANCE:>14.1f} {rate / base:>17.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
