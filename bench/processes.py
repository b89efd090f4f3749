"""The main job in one process against the same in child processes, side by side in one run.

Both run the same scenarios on the reference pair from this checkout, in turn (A B A B ...), so a
machine that gets slower or faster during the run weighs on both: `conformance run --processes 1`
(today's in-process path: harness, reference engine and reference worker share one interpreter)
and `conformance run --processes <the machine's cores>`, both with `--no-reports`.
Each figure is the whole command's wall time, start-up included, and the CPU time of it and its
children; the ratio default/one-process is taken round by round and its median printed, with the
load average, since the machine is shared.

    ./dev bench processes [--rounds N] [--processes P] [--jobs J] [--scenario GLOB ...]

Goal (issue #24 item 4): the whole library on the reference pair under 10 s; the ratio says how much
of it the processes give on this machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the command and its children) and exit status of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2, help="pairs of runs (default 2)")
    p.add_argument("--processes", type=int, default=None, help="processes of the second command (default: "
                                                                "the machine's cores)")
    p.add_argument("--jobs", type=int, default=None, help="--jobs of both (default: conformance run's)")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB", help="only these scenarios")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds: give 1 or more")
    common = [sys.executable, "-m", "conformance", "run", "--no-reports",
              *(["--jobs", str(args.jobs)] if args.jobs else []), *[w for g in args.scenario for w in ("--scenario", g)]]
    one = [*common, "--processes", "1"]
    many = [*common, "--processes", str(args.processes or os.cpu_count() or 2)]
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; cores: {os.cpu_count()}; "
          f"processes: {args.processes or os.cpu_count()}")
    ratios = []
    for n in range(args.rounds):
        a, a_cpu, a_code = _timed(one)
        b, b_cpu, b_code = _timed(many)
        ratios.append(b / a)
        print(f"round {n + 1}: one process {a:6.1f} s wall {a_cpu:5.1f} s CPU (exit {a_code})   "
              f"processes {b:6.1f} s wall {b_cpu:5.1f} s CPU (exit {b_code})   processes/one {b / a:.2f}", flush=True)
    print(f"median processes/one {statistics.median(ratios):.2f} over {args.rounds} round(s); "
          f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
