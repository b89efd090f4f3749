"""`conformance engines-diff`: run, record, normalise, compare, report."""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conformance.errors import InputError

ENGINES = ("daprd", "durabletask-go")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "engines-diff", help="run the flow scenarios on the reference engine and on real engines (reference worker) "
                             "and report every difference",
        description="Every flow scenario, with the reference worker, on the reference engine and on each --engine; "
                    "per instance its history, the work items the worker received, every management call's "
                    "answer and the statuses seen are compared after normalising what the contract leaves free. "
                    "Writes engine-differential.md and .json.")
    p.add_argument("--engine", action="append", default=[], choices=ENGINES,
                   help="engine to compare with the reference (repeatable; default both)")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB", help="only these scenario ids")
    p.add_argument("--scenarios", type=Path, default=None, help="scenario folder (default: the library's)")
    p.add_argument("--jobs", type=int, default=2, help="scenarios run at once (default 2)")
    p.add_argument("--reports", type=Path, default=None, metavar="DIR", help="default reports/")
    p.add_argument("--recordings", type=Path, default=None, metavar="FILE",
                   help="keep every recording in FILE (JSON lines); with --compare-only, read them from it")
    p.add_argument("--compare-only", action="store_true",
                   help="run nothing: compare the recordings of an earlier --recordings FILE")
    return p


def run(args: argparse.Namespace) -> int:
    from conformance.enginediff import compare, fates, normalise, record, report
    from conformance.library import find_library
    from conformance.scenario.loader import load_all
    from conformance.targets.preflight import not_installed
    from conformance.targets.registry import DEFAULT_TARGETS, load_targets

    library = find_library()
    folder = args.scenarios or library.scenarios
    if not folder.is_dir():
        raise InputError(f"scenario folder {folder} does not exist")
    table = fates.load()
    targets = load_targets(DEFAULT_TARGETS)
    engines = list(dict.fromkeys(args.engine or ENGINES))
    pairs = {e: targets.pair(e, "reference") for e in ["reference", *engines]}
    missing = not_installed(list(pairs.values()), root=library.root)
    if missing:
        raise InputError(missing, subject="the engines to compare")
    scenarios = [s for s in load_all(folder, patterns=args.scenario) if s.kind != "vector"]
    # A scenario is compared where both pairs run it: the engine direction, and the capabilities it needs.
    plan = [(s, e) for e in ["reference", *engines] for s in scenarios
            if "engine" in s.applies_to and set(s.requires) <= pairs[e].capabilities
            and (e == "reference" or set(s.requires) <= pairs["reference"].capabilities)]
    if not plan:
        raise InputError("no flow scenario matches the selection")
    recordings: dict[tuple[str, str], Any] = {}
    outcomes: dict[str, dict[str, str]] = {e: {} for e in pairs}
    if args.compare_only:
        if args.recordings is None or not args.recordings.is_file():
            raise InputError("--compare-only reads --recordings FILE, which does not exist")
        for rec in record.load(args.recordings):
            if rec.engine in pairs:
                recordings[(rec.engine, rec.scenario)] = rec
                outcomes[rec.engine][rec.scenario] = rec.outcome
    else:
        _run_all(plan, pairs, recordings, outcomes, jobs=args.jobs, keep=args.recordings)
    diffs = []
    for engine in engines:
        for sid in sorted(outcomes[engine]):
            ref, other = recordings.get(("reference", sid)), recordings.get((engine, sid))
            if ref is None or other is None:
                continue
            diffs += compare.compare(sid, engine, normalise.normalise(ref), normalise.normalise(other))
    command = shlex.join(["conformance", "engines-diff", *_portable(sys.argv[2:])]) \
        if sys.argv[1:2] == ["engines-diff"] else "conformance engines-diff"
    paths = report.write(out_dir=args.reports or library.reports, diffs=diffs, table=table, runs=outcomes,
                         command=command)
    unexplained = sum(1 for d in diffs if fates.fate_of(d, table) is None)
    print(f"{len(diffs)} difference(s), {unexplained} unexplained; reports: " + ", ".join(map(str, paths.values())))
    return 1 if unexplained else 0


def _portable(argv: Sequence[str]) -> list[str]:
    """The options without file locations (a report names no path of one machine)."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--reports", "--recordings", "--scenarios"):
            skip = True
        elif not word.startswith(("--reports=", "--recordings=", "--scenarios=")):
            out.append(word)
    return out


def _run_all(plan: list[tuple[Any, str]], pairs: dict[str, Any], recordings: dict[tuple[str, str], Any],
             outcomes: dict[str, dict[str, str]], *, jobs: int, keep: Path | None) -> None:
    from conformance.enginediff import record
    from conformance.runner.execute import run_scenario
    from conformance.runner.isolation import engine_turn

    lock = threading.Lock()
    locks: dict[str, Any] = {}
    sink = keep.open("w", encoding="utf-8") if keep is not None else None

    def one(item: tuple[Any, str]) -> None:
        scenario, engine = item
        pair = pairs[engine]
        held: dict[str, Any] = {}
        with engine_turn(pair, scenario, locks):
            result = run_scenario(scenario, pair, capture=lambda **kw: held.update(kw))
        rec = record.build(scenario=scenario.id, engine=engine, outcome=result.outcome.value,
                           **held) if held else None
        with lock:
            outcomes[engine][scenario.id] = result.outcome.value
            if rec is not None:
                recordings[(engine, scenario.id)] = rec
                if sink is not None:
                    record.dump(rec, sink)
        print(f"{engine:15} {result.outcome.value:15} {scenario.id}", file=sys.stderr, flush=True)

    try:
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, 2)), thread_name_prefix="enginediff") as pool:
            list(pool.map(one, plan))
    finally:
        if sink is not None:
            sink.close()


__all__: Sequence[str] = ("add_parser", "run")
