"""The cells each part of the library reaches: vectors read from their files, flow scenarios run on
the reference pair (their histories and the proxy's transcript), fuzzer schedules drawn by the
fuzzer's own interleaver."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskhub_programs import Bundle, parse_bundle
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind

from conformance.arrival.cells import Cell
from conformance.arrival.classify import classify, turns_of

_PAST = re.compile(r"\bpast=(\d+)")


@dataclass(frozen=True, kw_only=True)
class ScenarioReach:
    scenario: str  # its id
    cells: frozenset[Cell]
    outcome: str = ""  # the reference pair's outcome, for a flow run here
    note: str = ""


def fresh_turns(history: Sequence[pb.HistoryEvent], transcript: Iterable[Any], instance_id: str) -> frozenset[int]:
    """The turns of `instance_id` dispatched on another worker stream than the instance's previous
    turn (a stopped, restarted or cut worker): that worker had not built what they resolve."""
    starts = [i for i, ev in enumerate(history) if ev.HasField(EventKind.WORKFLOW_STARTED.field)]
    turn = turns_of(history)
    stream, last, fresh = 0, None, set()
    for entry in transcript:
        if entry.rpc != "GetWorkItems" or entry.channel != "worker":
            continue
        if entry.direction == "request":
            stream += 1
            continue
        request = (entry.message or {}).get("workflowRequest") or {}
        if entry.direction != "item" or request.get("instanceId") != instance_id:
            continue
        m = _PAST.search(entry.summary)
        past = int(m.group(1)) if m else 0
        if past > len(history) or (past and past not in starts):
            continue  # another generation's turn
        t = turn[past] if past < len(history) else len(starts)
        if last is not None and stream != last:
            fresh.add(t)
        last = stream
    return frozenset(fresh)


def bundle_of(scenario: Any) -> Bundle:
    return parse_bundle({"programs": dict(scenario.programs_doc)})


def vector_reach(scenario: Any) -> ScenarioReach:
    """A vector's turn: its past and new events; the worker under test replays it cold, so its turn
    is a fresh one."""
    vec = scenario.vector
    history = list(vec.past) + list(vec.new)
    reached = classify(bundle_of(scenario), instance_id=vec.instance_id, history=history,
                       fresh=[max(turns_of(history), default=0)])
    return ScenarioReach(scenario=scenario.id, cells=reached.cells, note=reached.note)


def flow_reach(scenario: Any, pair: Any) -> ScenarioReach:
    """Run a flow scenario on `pair` and classify every instance it observed."""
    from conformance.runner.execute import run_scenario

    got: dict[str, Any] = {}
    result = run_scenario(scenario, pair, reproduce="arrival coverage", capture=lambda **kw: got.update(kw))
    obs = got.get("observed")
    cells: set[Cell] = set()
    notes = []
    if obs is not None:
        bundle = bundle_of(scenario)
        for iid, history in obs.raw_histories.items():
            reached = classify(bundle, instance_id=iid, history=history,
                               fresh=fresh_turns(history, got.get("transcript", ()), iid))
            cells |= reached.cells
            if reached.note:
                notes.append(f"{iid}: {reached.note}")
    return ScenarioReach(scenario=scenario.id, cells=frozenset(cells), outcome=result.outcome.value,
                         note="; ".join(notes))


def fuzz_reach(*, examples: int, seed: int = 0) -> dict[Cell, int]:
    """Draw `examples` schedules of the worker campaign's random programs with the fuzzer's
    interleaver (conformance/fuzz/interleave.py) and count the examples reaching each cell. A turn
    abandoned and redelivered makes the next turn a fresh one (the worker that built it is gone)."""
    from conformance.fuzz.interleave import RandomChooser, run_program
    from conformance.fuzz.programs import sample_pool

    rng = random.Random(seed)
    counts: dict[Cell, int] = {}
    pool_size = 24
    for n in range(examples):
        if n % pool_size == 0:  # a round: a fresh pool of the campaign's programs
            doc = sample_pool(seed + n // pool_size, pool_size)
            bundle = parse_bundle({"programs": doc})
            names = [k for k in doc if k.startswith("p")]
        run = run_program(bundle, rng.choice(names), rng.choice([None, 0, 1, 2]), RandomChooser(rng),
                          instance_id=f"fz-{n}")
        cells: set[Cell] = set()
        for history, fresh in generations(run.cases):
            cells |= classify(bundle, instance_id=run.instance_id, history=history, fresh=fresh).cells
        for cell in cells:
            counts[cell] = counts.get(cell, 0) + 1
    return counts


def generations(cases: Sequence[Any]) -> list[tuple[list[pb.HistoryEvent], frozenset[int]]]:
    """Each generation's history as its last dispatched turn saw it (past + new), with its fresh turns."""
    out: list[tuple[list[pb.HistoryEvent], frozenset[int]]] = []
    history: list[pb.HistoryEvent] = []
    fresh: set[int] = set()
    redelivered = False
    for case in cases:
        if case.form not in ("dispatched", "redelivered"):
            continue
        if history and len(case.past) < len(history) - len(case.new):
            out.append((history, frozenset(fresh)))  # a new generation began
            fresh = set()
        turn = sum(1 for ev in case.past if ev.HasField(EventKind.WORKFLOW_STARTED.field))
        if case.form == "redelivered":
            redelivered = True
            continue
        if redelivered:
            fresh.add(turn)
            redelivered = False
        history = list(case.past) + list(case.new)
    if history:
        out.append((history, frozenset(fresh)))
    return out


def tally(reaches: Iterable[ScenarioReach]) -> dict[Cell, list[str]]:
    out: dict[Cell, list[str]] = {}
    for r in reaches:
        for cell in r.cells:
            out.setdefault(cell, []).append(r.scenario)
    return out


def counts(by_cell: Mapping[Cell, Sequence[str]]) -> dict[Cell, int]:
    return {cell: len(v) for cell, v in by_cell.items()}
