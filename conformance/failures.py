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

from conformance.verdict import Judgement, Level, Mismatch, Verdict, group

_LEVEL_OF = {Verdict.FAILED: Level.MUST, Verdict.WARNING: Level.SHOULD, Verdict.OBSERVATION: Level.OBSERVATION}
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


def render(failures: Sequence[Failure], *, sources: Mapping[str, str], note: str = "", reproduce: str = "") -> str:
    """A scenario's failure text: worst first, what is broken (with the requirement and where the contract
    says so), then what differs; then `note` and the `Reproduce with:` line."""
    check_of = {f.text: f.check for f in failures}
    blocks = []
    for section in group((_VERDICT_OF[f.level], f.requirement, f.text) for f in failures):
        lines = [section.heading]
        if section.verdict is Verdict.FAILED:  # where the contract says so
            lines += [f"  {rid}: {sources[rid]}" for rid in section.requirements if rid in sources]
        lines += [f"  - [{check_of.get(t, 'check')}] {t}" for t in section.texts]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + f"{note}\n\n{reproduce_line(reproduce)}"


__all__ = ["Failure", "TargetMisbehaved", "failures_of", "render", "reproduce_block", "reproduce_line"]
