"""The arrival-order cells (conformance/arrival/cells.py) as the worker campaigns' coverage
targets: each example's schedules are classified generation by generation; every cell reached is
a Hypothesis `event` ("arrival: any x late") and the number of cells one example reaches is its
`target`, so Hypothesis steers towards schedules that reach more of them. The campaign's report
says which targets it reached and how often (`ArrivalTally.describe`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskhub_programs import Bundle
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind

from conformance.arrival.cells import TARGETS, Cell
from conformance.arrival.classify import classify
from conformance.dialects.turn import TurnCase


def generations(cases: Sequence[TurnCase]) -> list[tuple[list[pb.HistoryEvent], frozenset[int]]]:
    """Each generation of one schedule: its history as its last dispatched turn saw it (past + new)
    and its fresh turns (a turn after an abandoned, redelivered attempt: the worker that built what
    it resolves is gone)."""
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
        if case.form == "redelivered":
            redelivered = True
            continue
        if redelivered:
            fresh.add(sum(1 for ev in case.past if ev.HasField(EventKind.WORKFLOW_STARTED.field)))
            redelivered = False
        history = list(case.past) + list(case.new)
    if history:
        out.append((history, frozenset(fresh)))
    return out


def cells_of(bundle: Bundle, runs: Iterable[Any], mutated: Iterable[TurnCase] = ()) -> frozenset[Cell]:
    """The cells the schedules (interleave.SimRun) of one example reach, and its mutated turns
    (mutate.py: a duplicated result is how a worker meets a duplicate, which engines drop), each
    sent cold to the worker as a vector is."""
    cells: set[Cell] = set()
    for run in runs:
        for history, fresh in generations(run.cases):
            cells |= classify(bundle, instance_id=run.instance_id, history=history, fresh=fresh).cells
    for case in mutated:
        history = list(case.past) + list(case.new)
        last = sum(1 for ev in case.past if ev.HasField(EventKind.WORKFLOW_STARTED.field))
        cells |= classify(bundle, instance_id=case.instance_id, history=history, fresh=[last]).cells
    return frozenset(cells)


@dataclass
class ArrivalTally:
    """Examples per cell over a campaign."""

    counts: dict[Cell, int] = field(default_factory=dict)

    def observe(self, bundle: Bundle, runs: Iterable[Any], mutated: Iterable[TurnCase] = ()) -> frozenset[Cell]:
        """Classify one example (inside a Hypothesis test: its events and target are recorded)."""
        from hypothesis import event, target

        cells = cells_of(bundle, runs, mutated)
        for cell in sorted(cells):
            self.counts[cell] = self.counts.get(cell, 0) + 1
            event(f"arrival: {cell}")
        target(float(len(cells)), label="arrival cells")
        return cells

    def describe(self) -> str:
        reached = [c for c in TARGETS if c in self.counts]
        missed = [str(c) for c in TARGETS if c not in self.counts]
        head = f"arrival-order targets reached: {len(reached)} of {len(TARGETS)}"
        shown = ", ".join(f"{c} {self.counts[c]}" for c in reached)
        return f"{head} ({shown}); not reached: {', '.join(missed) or 'none'}"
