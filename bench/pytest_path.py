"""The scenario library through pytest against `conformance run`, side by side in one run.

All run the same scenarios on the reference pair from this checkout, in turn (A B C A B C ...), so
a machine that gets slower or faster during the run weighs on all: `conformance run --jobs J
--no-reports`, `pytest scenarios/ --conformance-jobs J` (one process, J items in flight) and
`pytest scenarios/ -n auto --conformance-jobs J` (J/2 xdist workers, two items in flight each).
Each figure is the whole command's wall time, start-up included; the ratios pytest/CLI are taken
round by round and their medians printed. The load average is printed too.

    ./dev bench pytest_path [--rounds N] [--jobs J] [--scenario GLOB ...]

Goal (issue #26): the pytest path about as fast as `conformance run`'s own jobs (ratios near 1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(argv: list[str]) -> tuple[float, int]:
    began = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.monotonic() - began, done.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2, help="pairs of runs (default 2)")
    p.add_argument("--jobs", type=int, default=6, help="scenarios at once in both paths (default 6)")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB", help="only these scenarios")
    args = p.parse_args()
    selection = [w for g in args.scenario for w in ("--scenario", g)]
    cli = [sys.executable, "-m", "conformance", "run", "--no-reports", "--jobs", str(args.jobs), *selection]
    pyt = [sys.executable, "-m", "pytest", "scenarios", "-q", "-p", "no:cacheprovider",
           "--conformance-jobs", str(args.jobs), *(w.replace("--scenario", "--conformance-scenario") for w in selection)]
    xdist = [*pyt, "-n", "auto"]
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    plain_ratios, xdist_ratios = [], []
    for n in range(args.rounds):
        a, a_code = _timed(cli)
        b, b_code = _timed(pyt)
        c, c_code = _timed(xdist)
        plain_ratios.append(b / a)
        xdist_ratios.append(c / a)
        print(f"round {n + 1}: conformance run {a:6.1f} s (exit {a_code})   pytest {b:6.1f} s (exit {b_code})   "
              f"pytest -n auto {c:6.1f} s (exit {c_code})   pytest/cli {b / a:.2f}   xdist/cli {c / a:.2f}", flush=True)
    print(f"median pytest/cli {statistics.median(plain_ratios):.2f}, pytest -n auto/cli "
          f"{statistics.median(xdist_ratios):.2f} over {args.rounds} round(s); "
          f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
