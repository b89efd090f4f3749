"""Which requirement a mismatch is charged to: the registry keyed by what the mismatch is about.

A scenario's listed requirements say what it means to check; a mismatch falls under the requirement
its kind breaks (docs/verdicts.md "From mismatches to a verdict"):

- a mismatch that names its requirement (a history rule, a replay of the worker's own history) is
  charged to it alone;
- a scenario's explicit `charges:` (subject -> requirement) comes next: written in the YAML, never guessed;
- a subject with requirements of its own (`Charge.about`) is charged to those the scenario lists, else to
  its first: a custom status encoded twice is RPL-EXEC-001 (the answer is not what the code set), never
  the RPL-DET-001 a vector lists beside it;
- any other mismatch weighs on the scenario's listed requirements that no subject keeps to itself
  (`RESERVED`), at the strongest of their levels and only on those of that level: one mismatch, one
  verdict (never FAILED under one requirement and an OBSERVATION under another). Where the scenario's
  only strong requirements are reserved, the subject's `fallback` takes it.

A root cause comes before all of these: where the engine refused the worker's answers for an instance
(taskhub_core.incidents), what that instance then shows (a status never reached, an output never made)
is charged to the requirement the refused answer breaks (`refusal_requirement`), with the refusal in
its text: a retry that reuses its first attempt's action id is ACT-RETRY-001, not the HIST-DEDUP-001
of the scenario it happened in (`root_causes`). Where the engine refused nothing, a cause the instance's
history shows comes next (`Cause`: a retry the worker did not make, conformance/retry_causes.py).

Pure: `judge` folds a scenario's mismatches into verdicts by calling `charge` for each one; it lives here, beside
the registry, so that conformance/verdict.py (the vocabulary) imports nothing of the charging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from taskhub_core.incidents import REFUSED_ANSWERS, Incident, IncidentKind
from taskhub_wire.kinds import ActionKind

from conformance.verdict import (CROSS_WORKER, OUTCOME_OF_LEVEL, Judgement, Level, Mismatch, Outcome, Subject, group,
                                 worst)

EXECUTES = "RPL-EXEC-001"  # a turn is answered with what the workflow code does


@dataclass(frozen=True, slots=True, kw_only=True)
class Charge:
    """Where one subject of mismatch weighs."""

    about: tuple[str, ...] = ()  # requirements this subject falls under (listed ones first, else the first)
    reserved: bool = False  # `about` are broken by this subject only, whatever else a scenario lists
    fallback: str = EXECUTES  # when the scenario's strong requirements are all reserved for other subjects


CHARGES: Mapping[Subject, Charge] = {
    Subject.DETERMINISM: Charge(about=("RPL-DET-001",), reserved=True),
    Subject.ANSWER: Charge(about=("RPL-ANSWER-001",), reserved=True),
    Subject.TASK_EXECUTION_ID: Charge(about=("ACT-TEID-003",), reserved=True),
    # The answer's custom status is what the code set (RPL-EXEC-001); what GetInstance shows of it, LIFE-CUSTOM-001.
    Subject.CUSTOM_STATUS: Charge(about=(EXECUTES, "LIFE-CUSTOM-001")),
    Subject.VERSION: Charge(about=("VER-PIN-001", "PATCH-WORKER-001", "VER-NA-001")),
    **{s: Charge() for s in (Subject.OUTCOME, Subject.EXISTS, Subject.STATUS, Subject.OUTPUT, Subject.FAILURE,
                             Subject.STALL, Subject.HISTORY, Subject.LEDGER, Subject.STEP, Subject.ZOMBIE,
                             Subject.ACTIONS, Subject.HISTORY_RULE)},
}

# Requirements only their own subject breaks: a status or an action never weighs on them.
RESERVED = frozenset(r for c in CHARGES.values() if c.reserved for r in c.about)
_STRENGTH = (Level.MUST, Level.SHOULD, Level.OBSERVATION)


def charge(m: Mismatch, *, requirements: Sequence[str], levels: Mapping[str, str],
           charges: Mapping[Subject, str], spared: frozenset[str] = frozenset()) -> tuple[tuple[str, ...], Level]:
    """The requirements `m` weighs on and the one level it weighs at. `spared`: requirements of the side not
    under test in this run (an engine's where a worker is tested on the reference engine): no mismatch goes
    to them while the scenario lists one of the tested side's (a worker's custom status is RPL-EXEC-001, not
    LIFE-CUSTOM-001)."""

    def level_of(rid: str) -> Level:
        return Level.of_requirement(levels.get(rid, "MUST"))

    if m.requirement is not None:
        return (m.requirement,), m.level or level_of(m.requirement)
    if m.subject in charges:
        rid = charges[m.subject]
        return (rid,), m.level or level_of(rid)
    rule = CHARGES[m.subject]
    # The tested side's requirements: with the reference on the other side, a mismatch is not that side's
    # doing (an SDK's empty token on the reference engine is TOK-ECHO-001, not the engine's TOK-STALE-001),
    # unless the scenario lists only the other side's.
    open_ = ([r for r in requirements if r not in RESERVED and r not in spared]
             or [r for r in requirements if r not in RESERVED])
    if m.level is Level.OBSERVATION:
        # A difference the contract allows: filed under the scenario's MAY/INFO requirements, else RPL-XREF-001.
        same = [r for r in open_ if level_of(r) is Level.OBSERVATION]
        return tuple(same) or (CROSS_WORKER,), Level.OBSERVATION
    if rule.about:
        listed = [r for r in requirements if r in rule.about and r not in spared]
        return _strongest(listed or [rule.about[0]], level_of, m.level)
    if not requirements:
        return ("(no requirement)",), m.level or Level.MUST
    if m.level is not None:
        same = [r for r in open_ if level_of(r) is m.level]
        return tuple(same or open_[:1] or [rule.fallback]), m.level
    strong = [r for r in open_ if level_of(r) is not Level.OBSERVATION]
    if strong:
        return _strongest(strong, level_of, None)
    if all(level_of(r) is Level.OBSERVATION for r in requirements):
        # The scenario states only MAY/INFO requirements: what it finds is an observation there.
        return tuple(open_) or (CROSS_WORKER,), Level.OBSERVATION
    return (rule.fallback,), level_of(rule.fallback)


def judge(mismatches: Sequence[Mismatch], *, requirements: Sequence[str],
          levels: Mapping[str, str], charges: Mapping[Subject, str] | None = None,
          spared: frozenset[str] = frozenset()) -> Judgement:
    """Fold mismatches into verdicts. `levels` maps requirement ids to catalogue levels
    (an id missing from it counts as MUST: an uncatalogued requirement is not excused); each mismatch
    weighs once, at one level, on the requirements `charge` gives it (`charges`: the
    scenario's explicit `charges:`, subject -> requirement; `spared`: the requirements of the side a run does
    not test)."""
    status: dict[str, Outcome] = {r: Outcome.PASSED for r in requirements}
    marks: list[tuple[int, str, Outcome]] = []
    for index, m in enumerate(mismatches):
        rids, level = charge(m, requirements=requirements, levels=levels, charges=charges or {}, spared=spared)
        for rid in rids:
            status[rid] = worst((status.get(rid, Outcome.PASSED), OUTCOME_OF_LEVEL[level]))
            marks.append((index, rid, OUTCOME_OF_LEVEL[level]))
    outcome = worst(status.values())
    broken = tuple(r for r, v in status.items() if v is Outcome.FAILED)
    sections = group((verdict, rid, mismatches[i].text) for i, rid, verdict in marks)
    return Judgement(outcome=outcome, per_requirement=tuple(status.items()), broken=broken, sections=sections,
                     marks=tuple(marks))


def _strongest(rids: Sequence[str], level_of, level: Level | None) -> tuple[tuple[str, ...], Level]:
    """`rids` at one level: `level` if the mismatch has one, else the strongest of theirs (those of it only)."""
    if level is not None:
        return tuple(rids), level
    top = min((level_of(r) for r in rids), key=_STRENGTH.index)
    return tuple(r for r in rids if level_of(r) is top), top


# ------------------------------------------------------------------------------------------ root causes

# A retry reuses the failed attempt's id: the requirement that gives each attempt its own action id.
_RETRIES = {ActionKind.SCHEDULE_TASK.field: "ACT-RETRY-001", ActionKind.CREATE_CHILD_WORKFLOW.field: "CHILD-RETRY-001"}
# What a refused answer leads to: the subjects a root cause re-charges (not a check's own requirement).
_CONSEQUENCES = frozenset({Subject.OUTCOME, Subject.EXISTS, Subject.STATUS, Subject.OUTPUT, Subject.CUSTOM_STATUS,
                           Subject.STALL, Subject.HISTORY, Subject.LEDGER, Subject.STEP})


def refusal_requirement(incident: Incident) -> str | None:
    """The requirement a refused answer breaks (None: not the worker's doing)."""
    if incident.kind not in REFUSED_ANSWERS or incident.kind is IncidentKind.STALLED_AFTER_REFUSALS:
        return None
    action = incident.action
    if action is not None and action.holder_failed and action.kind in _RETRIES:
        return _RETRIES[action.kind]
    return EXECUTES  # an answer the engine cannot record is not what the code does (R3.13, R3.14)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """What an instance's history shows its worker did wrong, ahead of what the instance then shows
    (conformance/retry_causes.py: a retry not made)."""

    requirement: str
    text: str


def root_causes(mismatches: Sequence[Mismatch], incidents: Mapping[str, Sequence[Incident]], *,
                causes: Mapping[str, Cause] | None = None) -> list[Mismatch]:
    """`mismatches`, those about an instance whose answers the engine refused (or one of its children, whose
    ids start with the parent's) charged to the refusal's requirement, the refusal named in their text; else,
    where the instance's history shows a cause (`causes`, instance id -> Cause), charged to that."""
    out = []
    for m in mismatches:
        if not m.instance or m.subject not in _CONSEQUENCES or m.requirement is not None or m.level is not None:
            out.append(m)
            continue
        refusal = _first_refusal(m.instance, incidents)
        if refusal is not None:
            rid = refusal_requirement(refusal)
            assert rid is not None
            why = refusal.action.text if refusal.action is not None else refusal.text
            out.append(replace(m, requirement=rid, text=f"{m.text} [root cause: the engine refused the worker's "
                                                        f"answer: {why}]"))
            continue
        cause = _first_cause(m.instance, causes or {})
        out.append(m if cause is None else
                   replace(m, requirement=cause.requirement, text=f"{m.text} [root cause: {cause.text}]"))
    return out


def _first_cause(instance: str, causes: Mapping[str, Cause]) -> Cause | None:
    """The instance's own cause, else one of its children's (their ids start with the parent's)."""
    if instance in causes:
        return causes[instance]
    return next((causes[iid] for iid in sorted(causes) if iid.startswith(instance)), None)


def _first_refusal(instance: str, incidents: Mapping[str, Sequence[Incident]]) -> Incident | None:
    for iid in sorted(incidents, key=lambda i: (i != instance, i)):
        if iid == instance or iid.startswith(instance):
            found = next((i for i in incidents[iid] if refusal_requirement(i) is not None), None)
            if found is not None:
                return found
    return None


__all__ = ["CHARGES", "Cause", "Charge", "RESERVED", "charge", "refusal_requirement", "root_causes"]
