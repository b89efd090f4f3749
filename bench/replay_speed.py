"""Speed of `conformance replay` through dapr-ext-workflow: instances replayed per second on
histories of about 100 events.

Workload: `chain` of tests/replay/apps/dx_orders.py with 32 activities in sequence (99 events,
33 turns: each turn is replayed, so the SDK replays 33 growing prefixes per instance). The
histories are recorded once on the reference sidecar by the app itself and captured with
`conformance capture`'s own code; then the same histories are replayed through the app's worker
(`serve --version v1`, a separate process with the SDK's own virtualenv .sdk/dx) several rounds
in each `--mode` (turns: every turn; fast: two whole-history requests per instance), side by side,
reporting each round and the best (the least disturbed by other work on the machine; the load
average is printed), and the CPU time both processes spent (instances per CPU-second, which the
machine's load does not change). Every instance must replay cleanly, or the run fails.

    .venv/bin/python bench/replay_speed.py [--instances 60] [--rounds 3] [--jobs 8]

The goal is at least 50 instances per second on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conformance.replay.capture import Selection, capture  # noqa: E402
from conformance.replay.history import load  # noqa: E402
from conformance.replay.session import Mode, ReplaySidecar, WorkerProcess, replay_all  # noqa: E402
from fake_sidecar.server import SidecarServer  # noqa: E402

APP = ROOT / "tests" / "replay" / "apps" / "dx_orders.py"
PYTHON = ROOT / ".sdk" / "dx" / "bin" / "python"
GOAL = 50.0
CHAIN = 32


def record(n: int, out: Path) -> list:
    server = SidecarServer.start(port=0, db=":memory:")
    try:
        done = subprocess.run([str(PYTHON), str(APP), "record", "--address", server.address, "--orders", "0",
                               "--chain-count", str(n), "--chain-length", str(CHAIN)],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"recording failed:\n{done.stderr[-3000:]}")
        ids = json.loads(done.stdout.strip().splitlines()[-1])["chain"]
        capture(address=server.address, selection=Selection(instance_ids=tuple(ids)), out_dir=out)
    finally:
        server.stop()
    return [load(p) for p in sorted(out.glob("*.json"))]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), to report figures the machine's load does
    not change."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=8)
    args = p.parse_args()
    if not PYTHON.exists():
        raise SystemExit(f"{PYTHON} is missing: install the SDKs with scripts/install-sdks.sh")
    work = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    histories = record(args.instances, work / "histories")
    sizes = sorted({len(h.events) for h in histories})
    print(f"{len(histories)} histories of {sizes} events; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    sidecar = ReplaySidecar.start()
    worker = WorkerProcess(command=f"{PYTHON} {APP} serve --address {{address}} --version v1", log_dir=work / "logs")
    rates: dict[Mode, list[float]] = {m: [] for m in Mode}
    try:
        worker.start(sidecar.address)
        if not sidecar.wait_for_worker(timeout=60, alive=worker.alive):
            raise SystemExit(f"the worker did not connect: {worker.describe_exit()}")
        for rnd in range(1, args.rounds + 1):
            for mode in Mode:  # side by side, alternating, so that both see the same machine
                began, own0, wcpu0 = time.perf_counter(), sum(os.times()[:2]), _cpu_seconds(worker.proc.pid)
                results = replay_all(histories, sidecar, jobs=args.jobs, mode=mode)
                took = time.perf_counter() - began
                own, wcpu = sum(os.times()[:2]) - own0, _cpu_seconds(worker.proc.pid) - wcpu0
                bad = [r for r in results if not r.ok]
                if bad:
                    raise SystemExit(f"{len(bad)} instance(s) did not replay cleanly: {bad[0].headline()}")
                rates[mode].append(len(results) / took)
                print(f"round {rnd} --mode {mode.value:<5}: {len(results)} instances in {took:.2f} s = "
                      f"{rates[mode][-1]:.1f} instances/s; CPU {own:.2f} s replay + {wcpu:.2f} s SDK worker = "
                      f"{len(results) / max(own + wcpu, 1e-9):.0f} instances per CPU-second", flush=True)
    finally:
        worker.stop()
        sidecar.stop()
    for mode, got in rates.items():
        print(f"best --mode {mode.value:<5}: {max(got):.1f} instances/s (goal >= {GOAL:.0f})")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
