"""Fuzzing speed: histories per second through the pure executor and through each SDK driver over gRPC.

Workload: a pool of 24 random programs (conformance/fuzz/programs.py, seed 1) and random schedules
(conformance/fuzz/interleave.py, seeded), the way `conformance fuzz` makes them. One history is one
schedule of one program; checking it means answering every turn a worker is sent in it (3 turns
on average).

- pure executor: making the histories (each turn answered by `execute` while the schedule runs),
  then replaying every turn again (what a determinism check costs);
- each SDK driver (worker targets of drivers/*/target.yaml): the driver runs as its own process,
  connected to an in-process reference sidecar; every turn goes to it with `engine.inject_turn`
  (gRPC, one turn at a time) in the driver's history dialect, as the differential campaign sends
  it. Start-up is timed separately. A driver that is not installed is skipped, with the command
  that installs it; programs a driver cannot express are left out of its pool (counted).

    ./dev bench fuzz_rate [--quick] [--histories N] [--worker NAME ...]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fake_worker.programs import parse_bundle  # noqa: E402
from fake_worker.replay import execute  # noqa: E402

from conformance.fuzz import programs as P  # noqa: E402
from conformance.fuzz.dialect import Dialect  # noqa: E402
from conformance.fuzz.interleave import RandomChooser, run_program  # noqa: E402
from conformance.targets.registry import load_targets  # noqa: E402


def histories(bundle, names, n: int, seed: int = 1):
    out = []
    for i in range(n):
        rng = random.Random(seed * 100_000 + i)
        name = names[i % len(names)]
        out.append(run_program(bundle, name, rng.choice([0, 1, "a", None]), RandomChooser(rng),
                               instance_id=f"fz-{i}"))
    return out


def bench_executor(doc, n: int) -> dict:
    bundle = parse_bundle({"programs": doc})
    names = sorted(k for k in doc if k.startswith("p"))
    t0 = time.perf_counter()
    runs = histories(bundle, names, n)
    made = time.perf_counter() - t0
    turns = sum(len(r.cases) for r in runs)
    t0 = time.perf_counter()
    for r in runs:
        for c in r.cases:
            execute(bundle, instance_id=c.instance_id, past=c.past, new=c.new)
    replayed = time.perf_counter() - t0
    return {"histories": n, "turns": turns, "make_s": made, "replay_s": replayed}


def bench_driver(target, doc, n: int) -> dict:
    from conformance.fuzz.workers import DriverWorker

    bundle = parse_bundle({"programs": doc})
    t0 = time.perf_counter()
    worker = DriverWorker(target, bundle, doc, dialect=Dialect.from_capabilities(target.capabilities))
    started = time.perf_counter() - t0
    try:
        names = sorted(k for k in worker.bundle_doc if k.startswith("p"))
        runs = histories(worker.bundle, names, n)
        turns = silent = 0
        t0 = time.perf_counter()
        for r in runs:
            for c in r.cases:
                turns += 1
                if worker.answer(worker.dialect.turn(c)) is None:
                    silent += 1
        took = time.perf_counter() - t0
    finally:
        worker.close()
    return {"histories": n, "turns": turns, "start_s": started, "s": took, "silent": silent,
            "refused": len(worker.refused)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a fifth of the histories")
    ap.add_argument("--histories", type=int, default=None, help="histories per SDK driver (default 100)")
    ap.add_argument("--worker", action="append", default=[], help="only these worker targets")
    args = ap.parse_args(argv)
    logging.getLogger("fake_sidecar").setLevel(logging.ERROR)
    scale = 5 if args.quick else 1
    doc = P.sample_pool(1, 24)
    print(f"fuzz rate (Python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs); 24 random programs, random schedules")
    row = bench_executor(doc, 2000 // scale)
    print(f"\npure executor: {row['histories']} histories, {row['turns']} turns")
    print(f"  making the histories (every turn answered): {row['histories'] / row['make_s']:8.0f} histories/s "
          f"{row['turns'] / row['make_s']:8.0f} turns/s")
    print(f"  replaying every turn again:                 {row['histories'] / row['replay_s']:8.0f} histories/s "
          f"{row['turns'] / row['replay_s']:8.0f} turns/s")
    targets = load_targets()
    names = args.worker or [n for n, t in targets.workers.items() if not t.reference and t.starter is not None]
    n = args.histories or max(10, 100 // scale)
    print(f"\nSDK drivers over gRPC ({n} histories each, one turn at a time through the reference sidecar):")
    print(f"  {'worker':<24}{'start s':>8}{'histories/s':>13}{'turns/s':>9}{'ms/turn':>9}  notes")
    for name in names:
        target = targets.worker(name)
        try:
            r = bench_driver(target, doc, n)
        except FileNotFoundError as exc:
            print(f"  {name:<24}{'-':>8}{'-':>13}{'-':>9}{'-':>9}  skipped: not installed ({exc})")
            continue
        except Exception as exc:  # noqa: BLE001 - one driver failing does not end the benchmark
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"  {name:<24}{'-':>8}{'-':>13}{'-':>9}{'-':>9}  skipped: {first[:120]}")
            continue
        notes = []
        if r["refused"]:
            notes.append(f"{r['refused']} program(s) it cannot express left out")
        if r["silent"]:
            notes.append(f"{r['silent']} turn(s) unanswered in 10 s")
        dialect = Dialect.from_capabilities(target.capabilities)
        if not dialect.native:
            notes.append(f"dialect: {dialect.describe()}")
        print(f"  {name:<24}{r['start_s']:>8.1f}{r['histories'] / r['s']:>13.1f}{r['turns'] / r['s']:>9.0f}"
              f"{1000 * r['s'] / max(1, r['turns']):>9.1f}  {'; '.join(notes)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
