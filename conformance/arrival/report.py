"""`conformance coverage arrival`: the table of (construct, arrival) cells each part of the library
reaches, written to reports/arrival-coverage.md (docs/arrival-order.md).

Parts: each folder of hand-written scenarios (vectors classified from their files, flow scenarios
run on the reference pair and classified from the histories and the proxy's transcript), the
generated scenarios (scenarios/arrival/), and the fuzzer (schedules of the worker campaign's
random programs drawn by its interleaver).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.arrival.cells import IMPOSSIBLE, LATE_ENGINE, Arrival, Cell, Construct
from conformance.arrival.collect import ScenarioReach, flow_reach, fuzz_reach, vector_reach

GENERATED = "arrival"  # the folder of generated scenarios


def add_parser(sub: argparse._SubParsersAction) -> None:
    cov = sub.add_parser("coverage", help="coverage tables (arrival: the arrival-order cells each part reaches)")
    cov.add_argument("table", choices=["arrival"], help="which table")
    cov.add_argument("--scenarios", type=Path, default=None, help="scenario folder (default: the shipped library)")
    cov.add_argument("--scenario", action="append", default=[], metavar="GLOB",
                     help="only scenarios whose id matches (repeatable)")
    cov.add_argument("--fuzz-examples", type=int, default=200, metavar="N",
                     help="fuzzer schedules to draw (0: none; default 200)")
    cov.add_argument("--seed", type=int, default=0, help="the fuzzer's seed")
    cov.add_argument("--jobs", type=int, default=2, help="flow scenarios run at once (default 2)")
    cov.add_argument("--out", type=Path, default=None, help="default reports/arrival-coverage.md")


def run(args: argparse.Namespace) -> int:
    from conformance.errors import InputError
    from conformance.library import find_library
    from conformance.scenario.loader import load_all
    from conformance.scenario.model import ScenarioKind
    from conformance.targets.registry import load_targets

    lib = find_library()
    folder = args.scenarios or lib.scenarios
    if not folder.is_dir():
        print(f"conformance coverage: scenario folder {folder} does not exist; pass --scenarios DIR", file=sys.stderr)
        return 2
    if args.fuzz_examples < 0 or args.jobs < 1:
        print("conformance coverage: --fuzz-examples must be >= 0 and --jobs >= 1", file=sys.stderr)
        return 2
    try:
        scenarios = load_all(folder, patterns=args.scenario)
    except InputError as exc:
        print(f"conformance coverage: {exc.render()}", file=sys.stderr)
        return 2
    pair = load_targets().pair("reference", "reference")
    vectors = [s for s in scenarios if s.kind is ScenarioKind.VECTOR]
    flows = [s for s in scenarios if s.kind is not ScenarioKind.VECTOR]
    reaches = [vector_reach(s) for s in vectors]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        reaches += list(pool.map(lambda s: flow_reach(s, pair), flows))
    fuzz = fuzz_reach(examples=args.fuzz_examples, seed=args.seed) if args.fuzz_examples else {}
    text = render(reaches, fuzz=fuzz, fuzz_examples=args.fuzz_examples, seed=args.seed)
    out = args.out or (lib.reports / "arrival-coverage.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {out}")
    return 0


def part_of(scenario_id: str) -> str:
    return scenario_id.split("/", 1)[0]


def render(reaches: Sequence[ScenarioReach], *, fuzz: Mapping[Cell, int], fuzz_examples: int, seed: int) -> str:
    library: dict[Cell, list[str]] = {}
    generated: dict[Cell, list[str]] = {}
    for r in reaches:
        target = generated if part_of(r.scenario) == GENERATED else library
        for cell in r.cells:
            target.setdefault(cell, []).append(r.scenario)
    lines = ["# Arrival-order coverage", "",
             "Written by `conformance coverage arrival` (conformance/arrival/report.py; docs/arrival-order.md).",
             "Each cell: hand-written scenarios / generated scenarios (scenarios/arrival/) / fuzzer schedules "
             f"(of {fuzz_examples}, seed {seed}) reaching it. `n/a`: no history can reach it (the reason is "
             "below); `†`: a late timer: a wait's timeout timer, which the reference engine delivers after "
             "its event won by default only when made in the turn the event arrived, and with "
             "`engine: {late_timeout_timers: true}` always; or a retried member's retry timer after its "
             "all/any was decided, which every engine delivers (docs/arrival-order.md).",
             "",
             "| construct | " + " | ".join(a.value for a in Arrival) + " |",
             "|---|" + "---:|" * len(Arrival)]
    for c in Construct:
        row = []
        for a in Arrival:
            cell = Cell(c, a)
            if cell in IMPOSSIBLE:
                row.append("n/a")
                continue
            l, g, f = len(library.get(cell, ())), len(generated.get(cell, ())), fuzz.get(cell, 0)
            mark = "†" if cell in LATE_ENGINE else ""
            row.append(f"{'**0**' if not (l or g or f) else l} / {g} / {f}{mark}")
        lines.append(f"| {c.value} | " + " | ".join(row) + " |")
    missed = [cell for cell in (Cell(c, a) for c in Construct for a in Arrival)
              if cell not in IMPOSSIBLE and not (library.get(cell) or generated.get(cell) or fuzz.get(cell))]
    lines += ["", f"Cells no part reaches: {', '.join(str(c) for c in missed) or 'none'}.", "",
              "## Why a cell is n/a", ""]
    for cell, why in sorted(IMPOSSIBLE.items()):
        lines.append(f"- {cell}: {why}")
    lines += ["", "## Which scenarios reach each cell", "",
              "| cell | hand-written (by folder) | generated |", "|---|---|---|"]
    for cell in sorted(set(library) | set(generated)):
        folders: dict[str, int] = {}
        for sid in library.get(cell, ()):
            folders[part_of(sid)] = folders.get(part_of(sid), 0) + 1
        hand = ", ".join(f"{k} {v}" for k, v in sorted(folders.items()))
        gen = ", ".join(sorted(s.split("/", 1)[1] for s in generated.get(cell, ())))
        lines.append(f"| {cell} | {hand} | {gen} |")
    bad = [r for r in reaches if r.outcome and r.outcome != "PASSED"]
    noted = [r for r in reaches if r.note]
    if bad or noted:
        lines += ["", "## Runs to read with care", ""]
        lines += [f"- {r.scenario}: {r.outcome} on the reference pair (its cells are what its histories show)"
                  for r in bad]
        lines += [f"- {r.scenario}: the program does not replay its whole history ({r.note[:160]})" for r in noted]
    return "\n".join(lines) + "\n"
