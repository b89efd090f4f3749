"""Failures as data: what a target did wrong, where the scenario says so, and how to see it again.

A check (or a step) raises `TargetMisbehaved` with its mismatches; the runner judges them
(conformance.verdict) and turns each into one `Failure` per requirement it weighs on. The
failures travel in the event stream (`ScenarioFinished.failures`, events.jsonl) to every report,
and `render` is the one place their text is written: the sections of a failed scenario's message,
worst first, then the `Reproduce with:` line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from conformance.verdict import Judgement, Level, Mismatch, Outcome, group

_LEVEL_OF = {Outcome.FAILED: Level.MUST, Outcome.WARNING: Level.SHOULD, Outcome.OBSERVATION: Level.OBSERVATION}
_VERDICT_OF = {level: verdict for verdict, level in _LEVEL_OF.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """One mismatch a check found, as it weighs on one requirement."""

    check: str  # the check (or "step") that found it
    requirement: str
    level: Level  # MUST: the requirement is broken; SHOULD: a warning; OBSERVATION: a difference allowed
    text: str  # what differs, as the check says it
    location: str = ""  # the scenario's `file:line` it is about, when known
    expected: str | None = None  # when the check knows expected and actual apart
    got: str | None = None
    field: str = ""  # what differs, for the differential report (e.g. "ScheduleTask.id")
    reproduce: str = ""  # the command that runs this scenario on this pair again


class TargetMisbehaved(AssertionError):
    """The root of every finding about a target under test: one check's (or step's) mismatches.

    A mismatch given as plain text takes the level of the scenario's requirements (conformance.verdict).
    """

    def __init__(self, *, check: str, mismatches: Sequence[str | Mismatch], reproduce: str = "") -> None:
        self.check, self.reproduce = check, reproduce
        self.found = tuple(m if isinstance(m, Mismatch) else Mismatch(text=m) for m in mismatches)
        super().__init__(f"{check}: " + "; ".join(m.text for m in self.found))


def failures_of(judged: Judgement, found: Sequence[tuple[str, Mismatch]], *, reproduce: str) -> tuple[Failure, ...]:
    """Every (check, mismatch) in `found`, once per requirement `judged` weighs it on, in the order judged."""
    out = []
    for index, rid, verdict in judged.marks:
        check, m = found[index]
        out.append(Failure(check=check, requirement=rid, level=_LEVEL_OF[verdict], text=m.text, location=m.location,
                           expected=m.expected, got=m.got, field=m.field, reproduce=reproduce))
    return tuple(out)


def reproduce_line(command: str) -> str:
    """How a message ends: the command that runs the scenario on the pair again."""
    return f"Reproduce with: {command}"


def reproduce_block(command: str) -> str:
    """The same, as a block of its own (a report's description, a message written before failures were data)."""
    return f"Reproduce with:\n\n    {command}"


@lru_cache(maxsize=1)
def _catalogue():
    from conformance.reporting.catalogue import load_catalogue

    return load_catalogue()


def _requirement(rid: str):
    """The catalogue's entry for `rid` (None for an id the catalogue lacks, e.g. a test's own)."""
    return _catalogue().get(rid)


def describe_requirement(rid: str, *, source: str = "", full: bool = True) -> list[str]:
    """A requirement as an SDK author reads it: id, level and title; with `full` its text and where the
    contract says it (the English section of docs/spec.md, its words, a link; the original citation after)."""
    from conformance.citations import citations

    req = _requirement(rid)
    if req is None:
        return [f"  {rid}: {source}"] if source else []
    lines = [f"  {rid} ({req.level}): {req.title}"]
    if not full:
        return lines
    lines.append(f"    {' '.join(req.text.split())}")
    for c in citations(req.source):
        lines.append(f"    The contract, {c.english}: {c.words}")
        lines.append(f"      {c.link} (line {c.line})")
    lines.append(f"    Cited as: {req.source}")
    return lines


def _heading(verdict: Outcome, requirements: Sequence[str]) -> str:
    names = ", ".join(requirements)
    if verdict is Outcome.FAILED:
        return f"FAILED: breaks {names} (MUST)"
    if verdict is Outcome.WARNING:
        musts = [r for r in requirements if (req := _requirement(r)) is not None and req.level == "MUST"]
        if musts:  # a MUST weighed as a SHOULD here (e.g. a history no engine writes for this worker)
            return (f"WARNING: {names} — {'a MUST' if len(requirements) == 1 else 'MUSTs'} in the catalogue, "
                    "weighed as a SHOULD for this scenario (the mismatch below says why)")
        return f"WARNING: does not meet {names} (SHOULD)"
    return f"OBSERVATION ({names}): differs from the reference where the contract allows it"


def render(failures: Sequence[Failure], *, sources: Mapping[str, str], note: str = "", reproduce: str = "") -> str:
    """A scenario's failure text: worst first, what is broken (each requirement's id, level, title, its text
    and where the contract says so, in English with a link into docs/spec.md), then what differs; then
    `note` (the vector's turn, the SDK's log lines) and the `Reproduce with:` line."""
    check_of = {f.text: f.check for f in failures}
    blocks = []
    for section in group((_VERDICT_OF[f.level], f.requirement, f.text) for f in failures):
        lines = [_heading(section.verdict, section.requirements)]
        full = section.verdict is not Outcome.OBSERVATION
        for rid in section.requirements:
            lines += describe_requirement(rid, source=sources.get(rid, ""), full=full)
        lines += [f"  - [{check_of.get(t, 'check')}] {t}" for t in section.texts]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + f"{note}\n\n{reproduce_line(reproduce)}"


__all__ = ["Failure", "TargetMisbehaved", "describe_requirement", "failures_of", "render", "reproduce_block",
           "reproduce_line"]
