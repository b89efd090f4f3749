"""The cells each part of the library reaches: vectors read from their files, flow scenarios run on
the reference pair (their histories and the proxy's transcript), fuzzer schedules drawn by the
fuzzer's own interleaver."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from taskhub_programs import Bundle, parse_bundle
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind

from conformance.arrival.cells import Cell
from conformance.arrival.classify import classify, turns_of


@dataclass(frozen=True, kw_only=True)
class ScenarioReach:
    scenario: str  # its id
    cells: frozenset[Cell]
    outcome: str = ""  # the reference pair's outcome, for a flow run here
    note: str = ""


def dispatches(transcript: Iterable[Any], instance_id: str) -> list[tuple[int, pb.WorkflowRequest]]:
    """The turns of `instance_id` the proxy's transcript shows, each with the number of the worker
    stream (GetWorkItems call) that carried it. A message the transcript cut short is left out."""
    stream, out = 0, []
    for entry in transcript:
        if entry.rpc != "GetWorkItems" or entry.channel != "worker":
            continue
        if entry.direction == "request":
            stream += 1
            continue
        raw = (entry.message or {}).get("workflowRequest")
        if entry.direction != "item" or not raw or raw.get("instanceId") != instance_id:
            continue
        try:
            out.append((stream, json_format.ParseDict(raw, pb.WorkflowRequest(), ignore_unknown_fields=True)))
        except (json_format.ParseError, TypeError, ValueError):
            continue
    return out


def _turn_number(events: Iterable[pb.HistoryEvent]) -> int:
    return sum(1 for ev in events if ev.HasField(EventKind.WORKFLOW_STARTED.field))


def generations(final: Sequence[pb.HistoryEvent], seen: Sequence[tuple[int, pb.WorkflowRequest]]
                ) -> list[tuple[list[pb.HistoryEvent], frozenset[int]]]:
    """Each generation's history with its fresh turns: those dispatched on another worker stream than
    the generation's previous turn. The last generation's history is `final` (GetInstanceHistory);
    an earlier one's is its last dispatched turn (past + new), as the transcript shows it."""
    by_exec: dict[str, list[tuple[int, pb.WorkflowRequest]]] = {}
    for stream, req in seen:
        by_exec.setdefault(req.executionId.value, []).append((stream, req))
    out = []
    final_exec = next((ev.executionStarted.workflowInstance.executionId.value for ev in final
                       if ev.HasField(EventKind.EXECUTION_STARTED.field)), None)
    for exec_id, items in by_exec.items():
        fresh, last = set(), None
        for stream, req in items:
            if last is not None and stream != last:
                fresh.add(_turn_number(req.pastEvents))
            last = stream
        if exec_id != final_exec:
            req = items[-1][1]
            out.append((list(req.pastEvents) + list(req.newEvents), frozenset(fresh)))
        else:
            out.append((list(final), frozenset(fresh)))
    if final_exec not in by_exec and final:
        out.append((list(final), frozenset()))
    return out


def bundle_of(scenario: Any) -> Bundle:
    return parse_bundle({"programs": dict(scenario.programs_doc)})


def vector_reach(scenario: Any, pair: Any = None) -> ScenarioReach:
    """A vector's turn: its past and new events; the worker under test replays it cold, so its turn
    is a fresh one. With `pair`, the vector is also run there (its outcome)."""
    vec = scenario.vector
    history = list(vec.past) + list(vec.new)
    reached = classify(bundle_of(scenario), instance_id=vec.instance_id, history=history,
                       fresh=[max(turns_of(history), default=0)])
    outcome = ""
    if pair is not None:
        from conformance.runner.execute import run_scenario

        outcome = run_scenario(scenario, pair, reproduce="arrival coverage").outcome.value
    return ScenarioReach(scenario=scenario.id, cells=reached.cells, outcome=outcome, note=reached.note)


def reach(scenario: Any, pair: Any) -> ScenarioReach:
    """Run `scenario` on `pair` and say which cells it reached."""
    return vector_reach(scenario, pair) if scenario.vector is not None else flow_reach(scenario, pair)


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
        for iid, final in obs.raw_histories.items():
            for history, fresh in generations(final, dispatches(got.get("transcript", ()), iid)):
                reached = classify(bundle, instance_id=iid, history=history, fresh=fresh)
                cells |= reached.cells
                if reached.note:
                    notes.append(f"{iid}: {reached.note}")
    return ScenarioReach(scenario=scenario.id, cells=frozenset(cells), outcome=result.outcome.value,
                         note="; ".join(notes))


def fuzz_reach(*, examples: int, seed: int = 0) -> dict[Cell, int]:
    """Draw `examples` schedules of the worker campaign's random programs with the fuzzer's
    interleaver (conformance/fuzz/interleave.py), some with a mutated turn (conformance/fuzz/mutate.py),
    and count the examples reaching each cell (conformance/fuzz/arrival.py classifies them)."""
    from conformance.fuzz.arrival import cells_of
    from conformance.fuzz.interleave import RandomChooser, run_program
    from conformance.fuzz.mutate import mutate
    from conformance.fuzz.programs import sample_pool

    rng = random.Random(seed)
    counts: dict[Cell, int] = {}
    pool_size = 24
    for n in range(examples):
        if n % pool_size == 0:  # a round: a fresh pool of the campaign's programs
            doc = sample_pool(seed + n // pool_size, pool_size)
            bundle = parse_bundle({"programs": doc})
            names = [k for k in doc if k.startswith("p")]
        chooser = RandomChooser(rng)
        run = run_program(bundle, rng.choice(names), rng.choice([None, 0, 1, 2]), chooser, instance_id=f"fz-{n}")
        # As the worker campaign does: two examples in five also send one turn broken by a mutation.
        mutated = [mutate(chooser, rng.choice(run.cases), rounds=1)] if run.cases and rng.random() < 0.4 else []
        for cell in cells_of(bundle, [run], [m for m in mutated if m is not None]):
            counts[cell] = counts.get(cell, 0) + 1
    return counts


def tally(reaches: Iterable[ScenarioReach]) -> dict[Cell, list[str]]:
    out: dict[Cell, list[str]] = {}
    for r in reaches:
        for cell in r.cells:
            out.setdefault(cell, []).append(r.scenario)
    return out


def counts(by_cell: Mapping[Cell, Sequence[str]]) -> dict[Cell, int]:
    return {cell: len(v) for cell, v in by_cell.items()}
