"""How a scenario's mismatches become a verdict: only the contract fails (docs/verdicts.md).

A check reports `Mismatch`es. Each has a level: MUST (the target breaks a MUST of the catalogue:
FAILED), SHOULD (a warning) or OBSERVATION (it differs from the reference worker or the reference
engine where the contract leaves the choice open: informational, never FAILED). A mismatch without
its own level takes the level of the scenario's requirements: a MUST requirement is FAILED by it, a
SHOULD requirement warned, a MAY/INFO requirement observed.

Which requirement a mismatch is charged to is decided by what it is about (its `Subject`, the
registry in conformance/attribution.py), not by every requirement the scenario lists; one mismatch
weighs at one level (one verdict). `attribution.judge` folds a scenario's mismatches into one status per
requirement and the scenario's outcome; it is pure, so the runner, the fuzzer and the tests all
decide the same way.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


class Level(str, enum.Enum):
    """How much a mismatch weighs; strongest first."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    OBSERVATION = "OBSERVATION"

    @classmethod
    def of_requirement(cls, level: str) -> Level:
        """The verdict level of a catalogue level (MUST, SHOULD, MAY, INFO)."""
        return {"MUST": cls.MUST, "SHOULD": cls.SHOULD}.get(level, cls.OBSERVATION)


class Outcome(str, enum.Enum):
    """The one outcome vocabulary, end to end: a requirement's status in one scenario run (`judge`),
    a scenario's outcome on a pair (events.ScenarioFinished), a matrix cell (reporting.model), the
    exit code's and the pytest plugin's decisions (docs/verdicts.md). Only FAILED and ERROR fail a
    run by default."""

    PASSED = "PASSED"
    FAILED = "FAILED"  # the target breaks a MUST of the catalogue
    WARNING = "WARNING"  # the target breaks a SHOULD (fails a run only with --fail-on should)
    OBSERVATION = "OBSERVATION"  # differs from the reference where the contract leaves it open; never a failure
    KNOWN_FAILURE = "KNOWN_FAILURE"  # a MUST broken that the target declares as known (a declared gap)
    NOT_APPLICABLE = "NOT_APPLICABLE"  # the target lacks a capability the scenario requires
    ERROR = "ERROR"  # the harness or the target could not run the scenario
    UNCOVERED = "UNCOVERED"  # a matrix cell only: no scenario covers the requirement on the pair


# What a scenario run can end with (every outcome but a matrix cell's UNCOVERED).
SCENARIO_OUTCOMES = tuple(o for o in Outcome if o is not Outcome.UNCOVERED)
# Outcomes that leave nothing to read: a run with only these keeps no work files (a run's scenario folders).
NOTHING_TO_READ = frozenset({Outcome.PASSED, Outcome.NOT_APPLICABLE})
Verdict = Outcome  # `judge` decides PASSED, FAILED, WARNING or OBSERVATION: the same enum, under its old name

_STRENGTH = {Outcome.FAILED: 3, Outcome.WARNING: 2, Outcome.OBSERVATION: 1, Outcome.PASSED: 0}
OUTCOME_OF_LEVEL = {Level.MUST: Outcome.FAILED, Level.SHOULD: Outcome.WARNING, Level.OBSERVATION: Outcome.OBSERVATION}

# The requirement an observation of another worker's answers is filed under (catalogue level INFO).
CROSS_WORKER = "RPL-XREF-001"


class MismatchKind(enum.StrEnum):
    """What sort of difference a mismatch is (decided where it is found, never read back from its text)."""

    MISSING = "missing"  # expected there, absent
    UNEXPECTED = "unexpected"  # expected absent, there
    DIFFERENT = "different"  # there, with another value
    COUNT = "count"  # another number of items
    SHAPE = "shape"  # another sort of value (a mapping, a list, a pattern's match)
    RULE = "rule"  # a rule of the contract broken, not a comparison with a stated value


class Subject(enum.StrEnum):
    """What a mismatch is about (decided where it is found): the key of the attribution registry
    (conformance/attribution.py), and what a scenario's `charges:` names."""

    OUTCOME = "outcome"  # a result the scenario states without a finer subject
    EXISTS = "exists"
    STATUS = "status"
    OUTPUT = "output"
    CUSTOM_STATUS = "custom_status"
    FAILURE = "failure"  # a failure's type or message (the SDK language's: observations)
    STALL = "stall"
    HISTORY = "history"  # the history a flow scenario expects
    LEDGER = "ledger"
    STEP = "step"  # a step's own expectation (an RPC that should fail, a status waited for)
    ZOMBIE = "zombie"  # a stale completion's result reached history
    ACTIONS = "actions"  # a vector answer's actions: kinds, names, inputs, due times, the completion
    VERSION = "version"  # a vector answer's version and patches
    ANSWER = "answer"  # a turn answered at all
    DETERMINISM = "determinism"  # a worker's answer to its own history, replayed
    TASK_EXECUTION_ID = "task_execution_id"  # a worker's taskExecutionIds differ per call
    HISTORY_RULE = "history_rule"  # an engine rule a history breaks (carries its requirement)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mismatch:
    """One thing a check found wrong (or different)."""

    text: str
    level: Level | None = None  # None: the level of the scenario's requirements
    requirement: str | None = None  # the requirement it breaks, when the check knows it
    field: str = ""  # what differs, for the differential report (e.g. "ScheduleTask.id")
    location: str = ""  # the scenario's `file:line` the mismatch is about, when the check knows it
    expected: str | None = None  # what the scenario (or the contract) expects, when the check knows it apart
    got: str | None = None  # what the target did
    path: str = ""  # where in the observed data, e.g. "actions[0].ScheduleTask.input" or "history[3]"
    kind: MismatchKind | None = None  # None: a check that does not say
    rule: str = ""  # the engine rule broken (docs/engine-rules.md, e.g. "R2.4"), for a history break
    subject: Subject = Subject.OUTCOME  # what it is about: where it is charged (conformance/attribution.py)
    instance: str = ""  # the instance it is about, when one (root causes are per instance)


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    """One difference between a pattern and observed data, as the matcher finds it: where, what sort,
    and both values (`expected` the pattern's, `got` the data's; None where there is none)."""

    path: str  # e.g. "actions[0].ScheduleTask.input"
    kind: MismatchKind
    expected: Any = None
    got: Any = None
    text: str  # "path: expected X, got Y", for a reader

    @property
    def segments(self) -> tuple[str, ...]:
        """The path's names without list indexes: ("actions", "ScheduleTask", "input")."""
        return tuple(re.sub(r"\[\d+\]", "", self.path).split("."))


@dataclass(frozen=True, slots=True, kw_only=True)
class Break:
    """One engine rule a history breaks, as data: the rule, the requirement it falls under, and the
    event it shows at (None: the history as a whole). A history check returns these; the verdict
    reads `requirement`, never the text."""

    rule: str  # e.g. "R2.4"
    requirement: str  # e.g. "HIST-EVENTID-001"
    index: int | None
    text: str

    def mismatch(self, *, instance: str) -> Mismatch:
        at = f"{instance}: event #{self.index}" if self.index is not None else instance
        return Mismatch(text=f"{at}: {self.text}", requirement=self.requirement, rule=self.rule,
                        kind=MismatchKind.RULE, subject=Subject.HISTORY_RULE, instance=instance,
                        path=f"history[{self.index}]" if self.index is not None else "history")


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    """Mismatches of one verdict that weigh on the same requirements."""

    verdict: Outcome
    requirements: tuple[str, ...]
    texts: tuple[str, ...]

    @property
    def heading(self) -> str:
        names = ", ".join(self.requirements)
        if self.verdict is Outcome.FAILED:
            return f"FAILED: breaks {names} (MUST)"
        if self.verdict is Outcome.WARNING:
            return f"WARNING: does not meet {names} (SHOULD)"
        return f"OBSERVATION ({names}): differs from the reference where the contract allows it"


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    outcome: Outcome
    per_requirement: tuple[tuple[str, Outcome], ...]  # every requirement of the scenario, plus any a mismatch names
    broken: tuple[str, ...]  # requirements FAILED (MUST broken), in scenario order
    sections: tuple[Section, ...] = field(default=())  # worst first
    # (index of the mismatch, requirement, verdict): where each mismatch weighs, in the order judged.
    marks: tuple[tuple[int, str, Outcome], ...] = field(default=())


def worst(verdicts: Iterable[Outcome]) -> Outcome:
    return max(verdicts, key=_STRENGTH.__getitem__, default=Outcome.PASSED)


def group(marks: Iterable[tuple[Outcome, str, str]]) -> tuple[Section, ...]:
    """Sections from (verdict, requirement, text) marks, worst first; requirements that share the same
    mismatches are named together, so each mismatch is shown once."""
    texts: dict[tuple[Outcome, str], list[str]] = {}
    for verdict, rid, text in marks:
        texts.setdefault((verdict, rid), []).append(text)
    merged: dict[tuple[Outcome, tuple[str, ...]], list[str]] = {}
    for (verdict, rid), found in texts.items():
        merged.setdefault((verdict, tuple(found)), []).append(rid)
    order = sorted(merged, key=lambda k: -_STRENGTH[k[0]])
    return tuple(Section(verdict=v, requirements=tuple(merged[(v, found)]), texts=found) for v, found in order)


# ------------------------------------------------------------------------------ turn answers
#
# What of a worker's answer to a turn is the contract, and what is the worker's own choice. The
# contract: which actions (kind), in which number, with which activity/child/event names, inputs and
# results as JSON values, timer due times, the completion's status and output, the custom status,
# patches and version. The worker's choice: action ids (opaque unless an engine depends on them),
# child instance ids it sends, timer names and origins, error type names and messages (the
# language's), routers, a taskExecutionId (the sidecar makes those, seed 000 task_execution_id), a child
# retry's retryParentInstanceInfo, the timestamp of a carried event, an empty string where another worker
# leaves a field unset.

_LAYOUT_FIELDS = frozenset({"id", "instanceId", "taskExecutionId", "router", "origin", "timestamp", "errorType",
                            "errorMessage", "stackTrace", "isNonRetriable", "innerFailure",
                            "retryParentInstanceInfo"})  # a child retry's link to its first attempt (durabletask-go)


def answer_field(path: str) -> str:
    """`actions[0].ScheduleTask.input.x` -> `ScheduleTask.input`; `custom_status` -> `custom_status`."""
    parts = re.sub(r"\[\d+\]", "", path).split(".")
    if parts and parts[0] == "actions":
        parts = parts[1:]
    return ".".join(parts[:2]) if len(parts) >= 2 else ".".join(parts)


def classify_answer_mismatch(diff: Diff) -> Mismatch:
    """A difference in a vector's actions, with the level the contract gives it (decided from the
    difference's path, sort and values; its text is only carried along)."""
    fld = answer_field(diff.path)
    names = diff.segments
    leaf = names[-1]
    layout = bool(set(names) & _LAYOUT_FIELDS) or (fld.startswith("CreateTimer.") and leaf == "name")
    empty_vs_unset = ((diff.kind is MismatchKind.MISSING and diff.expected == "")
                      or (diff.kind is MismatchKind.UNEXPECTED and diff.got == "")
                      or (diff.kind is MismatchKind.DIFFERENT and diff.expected == "" and diff.got is None))
    rounded = leaf == "fireAt" and diff.kind is MismatchKind.DIFFERENT and _within_a_millisecond(diff.expected,
                                                                                                     diff.got)
    level = Level.OBSERVATION if layout or empty_vs_unset or rounded else None
    return Mismatch(text=diff.text, level=level, field=fld, path=diff.path, kind=diff.kind, subject=Subject.ACTIONS)


def _within_a_millisecond(expected: Any, got: Any) -> bool:
    """Two RFC 3339 due times less than a millisecond apart: a due time the worker rounded."""
    from datetime import datetime

    if not (isinstance(expected, str) and isinstance(got, str)):
        return False
    try:
        a, b = (datetime.fromisoformat(s.replace("Z", "+00:00")) for s in (expected, got))
    except ValueError:
        return False
    return abs((a - b).total_seconds()) < 0.001
