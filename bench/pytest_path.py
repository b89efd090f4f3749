"""The scenario library through pytest against `conformance run`, side by side in one run.

All run the same scenarios on the reference pair from this checkout, in turn (A B C D A B C D ...),
so a machine that gets slower or faster during the run weighs on all: `conformance run --jobs J
--no-reports`, `pytest scenarios/ --conformance-jobs J` (one process, J items in flight), `pytest
scenarios/ -n auto --conformance-jobs J` (the CLI's default process count: one, no xdist worker) and
`pytest scenarios/ -n 2 --conformance-jobs J` (two xdist workers, each its share of the items).
Each figure is the whole command's wall time, start-up included, and its CPU time (user + system,
children included); the ratios pytest/CLI are taken round by round and their medians printed. The
load average is printed too.

The pytest commands run with `-p no:hypothesispytest`: hypothesis, a test dependency of this project
and not of the scenario library, registers a pytest plugin that imports (and, being a pytest plugin's
package, assertion-rewrites) all of hypothesis at the end of every session, ~0.8 s of CPU that an
SDK's environment does not pay. `--with-hypothesis` keeps it.

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


def _timed(argv: list[str]) -> tuple[float, float, int]:
    """Wall time, CPU time of the command and its children, exit code."""
    before = os.times()
    began = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return time.monotonic() - began, cpu, done.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2, help="rounds of the four runs (default 2)")
    p.add_argument("--jobs", type=int, default=6, help="scenarios at once in every path (default 6)")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB", help="only these scenarios")
    p.add_argument("--with-hypothesis", action="store_true", help="keep hypothesis's pytest plugin loaded")
    args = p.parse_args()
    selection = [w for g in args.scenario for w in ("--scenario", g)]
    cli = [sys.executable, "-m", "conformance", "run", "--no-reports", "--jobs", str(args.jobs), *selection]
    pyt = [sys.executable, "-m", "pytest", "scenarios", "-q", "-p", "no:cacheprovider",
           *([] if args.with_hypothesis else ["-p", "no:hypothesispytest"]),
           "--conformance-jobs", str(args.jobs), *(w.replace("--scenario", "--conformance-scenario") for w in selection)]
    runs = {"conformance run": cli, "pytest": pyt, "pytest -n auto": [*pyt, "-n", "auto"],
            "pytest -n 2": [*pyt, "-n", "2"]}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    ratios: dict[str, list[float]] = {name: [] for name in runs if name != "conformance run"}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for n in range(args.rounds):
        timed = {name: _timed(argv) for name, argv in runs.items()}
        base = timed["conformance run"][0]
        for name in ratios:
            ratios[name].append(timed[name][0] / base)
        for name, (_, cpu, _) in timed.items():
            cpus[name].append(cpu)
        print(f"round {n + 1}: " + "   ".join(
            f"{name} {wall:5.1f} s wall {cpu:4.1f} s CPU (exit {code})" for name, (wall, cpu, code) in timed.items()),
              flush=True)
    print(f"medians over {args.rounds} round(s), wall ratio to conformance run: "
          + ", ".join(f"{name} {statistics.median(r):.2f}" for name, r in ratios.items()))
    print("median CPU s: " + ", ".join(f"{name} {statistics.median(c):.1f}" for name, c in cpus.items()))
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
