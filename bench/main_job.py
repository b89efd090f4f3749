"""The main job of another checkout (--baseline DIR) against this one's, side by side in one run.

Both run `conformance run` on the reference pair (the whole library unless --scenario), in turn
(baseline, this, baseline, this ...), so a machine that gets busier or quieter weighs on both. Each
keeps its own reports folder across rounds, as `./dev conformance` keeps reports/ (this checkout
starts the scenarios that took longest in the previous round first; the first round has none).
Per run it prints the run time `conformance run` reports (`finished in`), the whole command's
wall time, its CPU time (user + system, children included), the verdict counts and the load
average, and per round the scenarios whose outcome or per-requirement verdicts differ between the
two (their events.jsonl); then the median ratios baseline/this. Make a baseline with `git worktree add DIR main`
and `./dev setup` in it (its .venv is used; else this interpreter with DIR first on the path).

    .venv/bin/python bench/main_job.py --baseline DIR [--rounds N] [--jobs J] [--processes P] [--scenario GLOB ...]

(`./dev bench main_job ...` runs the same after installing every third-party target, which this one
does not need.)

Goal (issue #24 item 4): the whole library on the reference pair under 10 s of run time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Figures:
    run_s: float  # conformance run's own "finished in"
    wall_s: float  # the command, start-up and reports included
    user_s: float
    sys_s: float
    counts: str  # "377 passed, 0 failed, 3 not applicable"
    code: int

    def line(self) -> str:
        return (f"run {self.run_s:5.1f} s  wall {self.wall_s:5.1f} s  CPU {self.user_s + self.sys_s:5.1f} s "
                f"({self.user_s:.1f} user + {self.sys_s:.1f} sys)  {self.counts} (exit {self.code})")


def _python(checkout: Path) -> str:
    venv = checkout / ".venv" / "bin" / "python"
    return str(venv) if venv.is_file() else sys.executable


def _run(checkout: Path, reports: Path, extra: list[str]) -> Figures:
    argv = [_python(checkout), "-m", "conformance", "run", "--reports", str(reports), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(checkout)})
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = re.search(r"finished in ([0-9.]+)s", done.stdout)
    counts = re.findall(r"^\d+ passed.*$", done.stdout, flags=re.M)
    if run is None:
        sys.exit(f"bench: {checkout} did not finish a run (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return Figures(run_s=float(run.group(1)), wall_s=wall, user_s=after.ru_utime - before.ru_utime,
                   sys_s=after.ru_stime - before.ru_stime, counts=counts[-1] if counts else "?",
                   code=done.returncode)


def _verdicts(reports: Path) -> dict[tuple[str, str], tuple[str, tuple[tuple[str, str], ...]]]:
    """(scenario, pair) -> (outcome, per-requirement verdicts) of the run written to `reports`."""
    out = {}
    with (reports / "events.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if '"scenario_finished"' in line:
                e = json.loads(line)
                out[(e["scenario"], e["pair"])] = (e["outcome"], tuple(tuple(v) for v in e.get("verdicts") or ()))
    return out


def _differences(a: Path, b: Path) -> str:
    va, vb = _verdicts(a), _verdicts(b)
    differ = [k for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)]
    if not differ:
        return f"verdicts: the same for all {len(va)} scenarios"
    return f"verdicts: {len(differ)} of {len(set(va) | set(vb))} differ: " + "; ".join(
        f"{k[0]} ({va.get(k, ('absent',))[0]} -> {vb.get(k, ('absent',))[0]})" for k in differ)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", type=Path, required=True, metavar="DIR", help="the other checkout (e.g. main's)")
    p.add_argument("--rounds", type=int, default=2, help="pairs of runs (default 2)")
    p.add_argument("--jobs", type=int, default=None, help="--jobs of both (default: conformance run's)")
    p.add_argument("--processes", type=int, default=None, help="--processes of both (default: conformance run's)")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB", help="only these scenarios")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds: give 1 or more")
    base = args.baseline.resolve()
    if not (base / "conformance" / "__main__.py").is_file():
        p.error(f"--baseline {args.baseline}: not a checkout of this project (no conformance/__main__.py)")
    extra = [*(["--jobs", str(args.jobs)] if args.jobs else []),
             *(["--processes", str(args.processes)] if args.processes else []),
             *[w for g in args.scenario for w in ("--scenario", g)]]
    print(f"baseline {base}; this {ROOT}; cores {os.cpu_count()}; load average at start {_load()}", flush=True)
    runs: list[tuple[Figures, Figures]] = []
    with tempfile.TemporaryDirectory(prefix="bench-main-job-") as tmp:
        for n in range(args.rounds):
            a = _run(base, Path(tmp) / "baseline", extra)
            print(f"round {n + 1} baseline: {a.line()}  load {_load()}", flush=True)
            b = _run(ROOT, Path(tmp) / "this", extra)
            print(f"round {n + 1} this:     {b.line()}  load {_load()}", flush=True)
            print(f"round {n + 1} {_differences(Path(tmp) / 'baseline', Path(tmp) / 'this')}", flush=True)
            runs.append((a, b))

    def ratio(attr: str) -> float:
        return statistics.median(getattr(a, attr) / max(getattr(b, attr), 1e-9) for a, b in runs)

    cpu = statistics.median((a.user_s + a.sys_s) / max(b.user_s + b.sys_s, 1e-9) for a, b in runs)
    print(f"median baseline/this over {args.rounds} round(s): run time {ratio('run_s'):.2f}x, wall "
          f"{ratio('wall_s'):.2f}x, CPU {cpu:.2f}x (user {ratio('user_s'):.2f}x, sys {ratio('sys_s'):.2f}x); "
          f"load average at end {_load()}")
    return 0 if all(a.code == 0 and b.code == 0 for a, b in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
