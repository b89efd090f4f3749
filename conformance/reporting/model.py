"""A finished run folded out of the event stream, and what several reports share (cells, failure text).

Every report is a consumer of the events; the ones written at the end of a run (JUnit, summary,
matrix) first fold the events into a `RunView`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from conformance.events import Event, Outcome, RunFinished, RunStarted, ScenarioFinished, TranscriptEntry
from conformance.failures import reproduce_block
from conformance.reporting.catalogue import Catalogue, Requirement

OUTCOME_ORDER = (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.KNOWN_FAILURE, Outcome.WARNING,
                 Outcome.OBSERVATION, Outcome.NOT_APPLICABLE)
UNCATALOGUED_AREA = "(not in the catalogue)"


CellStatus = Outcome  # a matrix cell's status is an Outcome (UNCOVERED only here): the same enum


# Worst first: one failing scenario makes the requirement fail on that pair; a known failure stays
# visible over a pass; NOT_APPLICABLE only when nothing else ran.
CELL_PRECEDENCE = (
    Outcome.FAILED,
    Outcome.ERROR,
    Outcome.KNOWN_FAILURE,
    Outcome.WARNING,
    Outcome.OBSERVATION,
    Outcome.PASSED,
    Outcome.NOT_APPLICABLE,
)


@dataclass(frozen=True, slots=True)
class Cell:
    status: Outcome
    results: tuple[ScenarioFinished, ...] = ()

    @property
    def gap_passed(self) -> tuple[ScenarioFinished, ...]:
        return tuple(r for r in self.results if r.gap_passed)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One matrix row: a catalogue requirement, or an id a scenario names that the catalogue lacks."""

    id: str
    title: str
    level: str
    area: str
    requirement: Requirement | None


@dataclass(slots=True, kw_only=True)
class RunView:
    run_id: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None
    command: str = ""
    scenario_count: int = 0
    pairs: list[str] = field(default_factory=list)
    results: list[ScenarioFinished] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> RunView:
        view = cls()
        for event in events:
            view.add(event)
        return view

    def add(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.run_id = event.run_id
            self.started_at = event.started_at
            self.command = event.command
            self.scenario_count = event.scenario_count
            for pair in event.pairs:
                if pair not in self.pairs:
                    self.pairs.append(pair)
        elif isinstance(event, ScenarioFinished):
            self.results.append(event)
            if event.pair not in self.pairs:
                self.pairs.append(event.pair)
        elif isinstance(event, RunFinished):
            self.run_id = self.run_id or event.run_id
            self.finished_at = event.finished_at
            self.duration_s = event.duration_s

    def counts(self, pair: str | None = None) -> dict[Outcome, int]:
        out = dict.fromkeys(OUTCOME_ORDER, 0)
        for r in self.results:
            if pair is None or r.pair == pair:
                out[r.outcome] += 1
        return out

    def problems(self) -> list[ScenarioFinished]:
        """FAILED and ERROR results, in event order."""
        return [r for r in self.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)]

    def gaps_passed(self) -> list[ScenarioFinished]:
        return [r for r in self.results if r.gap_passed]

    def rows(self, catalogue: Catalogue) -> list[Row]:
        """The catalogue's requirements in file order, then ids that scenarios name but the catalogue lacks."""
        rows = [Row(id=r.id, title=r.title, level=r.level, area=r.area, requirement=r) for r in catalogue]
        extra: list[str] = []
        for result in self.results:
            for rid in result.requirements:
                if rid not in catalogue and rid not in extra:
                    extra.append(rid)
        rows += [Row(id=rid, title="", level="?", area=UNCATALOGUED_AREA, requirement=None) for rid in extra]
        return rows

    def cells(self) -> dict[tuple[str, str], Cell]:
        """(requirement id, pair) -> its aggregated cell; pairs with no covering scenario are absent (UNCOVERED).

        A result counts on each requirement with that requirement's own verdict in the run: a scenario
        that breaks one MUST and only differs on another fails the first row, not the second."""
        grouped: dict[tuple[str, str], list[tuple[Outcome, ScenarioFinished]]] = {}
        for result in self.results:
            for rid, status in requirement_statuses(result):
                grouped.setdefault((rid, result.pair), []).append((status, result))
        return {key: Cell(_worst(s for s, _ in rs), tuple(r for _, r in rs)) for key, rs in grouped.items()}

    def cell(self, cells: dict[tuple[str, str], Cell], requirement_id: str, pair: str) -> Cell:
        return cells.get((requirement_id, pair), Cell(Outcome.UNCOVERED))


def aggregate(results: Iterable[ScenarioFinished]) -> Outcome:
    return _worst(r.outcome for r in results)


def _worst(statuses: Iterable[Outcome]) -> Outcome:
    present = set(statuses)
    for status in CELL_PRECEDENCE:
        if status in present:
            return status
    return Outcome.UNCOVERED


def requirement_statuses(result: ScenarioFinished) -> list[tuple[str, Outcome]]:
    """Each requirement the result speaks for, with its status in that run (outcome-wide for old results,
    and for outcomes that are about the whole run: ERROR, NOT_APPLICABLE)."""
    if not result.verdicts or result.outcome in (Outcome.ERROR, Outcome.NOT_APPLICABLE):
        return [(rid, result.outcome) for rid in dict.fromkeys(result.requirements)]
    return [(rid, Outcome(value)) for rid, value in result.verdicts]


# ------------------------------------------------------------------------------------ text helpers


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def reason(result: ScenarioFinished) -> str:
    """One line saying why a result is what it is (empty for a plain pass)."""
    if result.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.WARNING, Outcome.OBSERVATION):
        return first_line(result.message) or result.outcome.value.lower()
    if result.outcome in (Outcome.KNOWN_FAILURE, Outcome.NOT_APPLICABLE):
        return result.gap_reason or first_line(result.message)
    if result.gap_passed:
        return "declared gap passed: remove it from targets.yaml"
    return ""


def failure_text(result: ScenarioFinished) -> str:
    """The full failure text; it ends with the "Reproduce with:" block (added here if the message lacks it)."""
    text = result.message.rstrip() or f"{result.outcome.value.lower()} (no message)"
    if result.reproduce and "Reproduce with:" not in text:
        text += f"\n\n{reproduce_block(result.reproduce)}"
    return text


def short_summary(entry: TranscriptEntry) -> str:
    """The entry's summary on one line, without a leading repeat of the rpc name ("Hello Hello Empty")."""
    text = " ".join(entry.summary.split())
    if entry.rpc and (text == entry.rpc or text.startswith(entry.rpc + " ")):
        text = text[len(entry.rpc) :].lstrip()
    return text


def transcript_line(entry: TranscriptEntry) -> str:
    """`+0.123s worker item GetWorkItems WorkItem ...`, the fault and a failed call's status marked."""
    line = f"+{entry.t:.3f}s {entry.channel} {entry.direction} {entry.rpc} {short_summary(entry)}".rstrip()
    if entry.status and entry.status.upper() != "OK":
        line += f"  [status: {entry.status}]"
    if entry.fault:
        line += f"  [FAULT: {entry.fault}]"
    return line


def transcript_text(transcript: Iterable[TranscriptEntry]) -> str:
    return "".join(transcript_line(e) + "\n" for e in transcript)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# Characters XML 1.0 cannot carry at all (a decoded payload may hold them).
_INVALID_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)
