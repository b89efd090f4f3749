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

- campaigns, side by side in one run (the machine's load is the same for both): the differential
  campaign as it was (`worker_fuzz.WorkerCampaign`, one driver process, each turn made by the
  reference and sent once) and the self-oracle campaign (`self_oracle.SelfOracleCampaign` on a
  `workers.DriverPool`: the SDK's answers drive the schedule, and every turn is replayed on the same
  process and on another one at once). Turns checked per second counts every turn a driver
  answered; Hypothesis, the engine model and the comparisons are included.

    ./dev bench fuzz_rate [--quick] [--histories N] [--worker NAME ...] [--campaigns] [--examples N] [--streams N]
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

from taskhub_programs import parse_bundle  # noqa: E402
from fake_worker.replay import execute  # noqa: E402

from conformance.fuzz import programs as P  # noqa: E402
from conformance.dialects.history import Dialect  # noqa: E402
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


def bench_campaigns(target, examples: int, streams: int) -> list[tuple[str, int, int, float]]:
    """(label, examples, turns, seconds) of the old differential campaign and the self-oracle one."""
    from conformance.fuzz.common import Budget
    from conformance.dialects.compare import profile_for
    from conformance.fuzz.programs import Features
    from conformance.fuzz.self_oracle import SelfOracleCampaign
    from conformance.fuzz.worker_fuzz import WorkerCampaign
    from conformance.fuzz.workers import DriverPool, DriverWorker

    dialect = Dialect.from_capabilities(target.capabilities)
    common = dict(target=target.name, features=Features.from_capabilities(target.capabilities),
                  profile=profile_for(target.name, target.capabilities), dialect=dialect, seed=1,
                  budget=Budget(examples=examples), database=None, derandomize=True, fresh_process=False, out=None)
    rows = []
    old = WorkerCampaign(make_worker=lambda bundle, doc: DriverWorker(target, bundle, doc, dialect=dialect), **common)
    t0 = time.perf_counter()
    old.run()
    rows.append(("differential campaign, 1 process (before)", old.clock.examples,
                 old.progress.counters.get("turns", 0), time.perf_counter() - t0))
    for perturb in (True, False):
        pools = []

        def make(bundle, doc):
            pools.append(DriverPool(lambda: DriverWorker(target, bundle, doc), streams=streams))
            return pools[-1]

        new = SelfOracleCampaign(make_worker=make, **common)
        new._perturb = perturb
        t0 = time.perf_counter()
        new.run()
        silent = sum(w.silent for p in pools for w in p.workers)
        label = f"self-oracle, {streams} processes" + ("" if perturb else ", no perturbations") + " (after)"
        rows.append((label + (f", {silent} unanswered" if silent else ""), new.clock.examples,
                     new.progress.counters.get("turns", 0), time.perf_counter() - t0))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a fifth of the histories")
    ap.add_argument("--histories", type=int, default=None, help="histories per SDK driver (default 100)")
    ap.add_argument("--worker", action="append", default=[], help="only these worker targets")
    ap.add_argument("--campaigns", action="store_true",
                    help="only the campaign comparison (before/after), on --worker (default dapr-ext-workflow)")
    ap.add_argument("--examples", type=int, default=150, help="examples per campaign (default 150)")
    ap.add_argument("--streams", type=int, default=3, help="driver processes of the self-oracle campaign (default 3)")
    args = ap.parse_args(argv)
    if args.campaigns:
        logging.getLogger("fake_sidecar").setLevel(logging.ERROR)
        print(f"fuzz campaigns (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs), "
              f"{args.examples} examples each, start-up included")
        print(f"  {'worker':<20}{'campaign':<58}{'examples/s':>11}{'turns/s':>9}{'turns':>7}{'s':>6}")
        for name in args.worker or ["dapr-ext-workflow"]:
            for label, ex, turns, took in bench_campaigns(load_targets().worker(name), args.examples, args.streams):
                print(f"  {name:<20}{label:<58}{ex / took:>11.1f}{turns / took:>9.0f}{turns:>7}{took:>6.0f}")
        return 0
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
