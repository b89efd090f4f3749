"""Replay determinism and zombie rejection, and the exact answers of turn-level vectors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from taskhub_wire.kinds import ActionKind, EventKind, Operation

from conformance.checks.base import FlowObservation, VectorObservation, check, fail
from conformance.scenario.matching import Matcher
from conformance.scenario.basics import MISSING
from conformance.verdict import Level, Mismatch, Subject, classify_answer_mismatch

SELF_DETERMINISM = "RPL-DET-001"
EXECUTES = "RPL-EXEC-001"
ANSWERED = "RPL-ANSWER-001"
DISTINCT_TEIDS = "ACT-TEID-003"
# The checks that replay turns on a fresh worker (the runner starts one early for them).
REPLAYING = frozenset({"replay_determinism", "same_item_twice"})



def turns(raw: list[Any], dicts: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) index ranges of the turns of a history: each starts at a WorkflowStarted."""
    starts = [i for i, e in enumerate(dicts) if e["kind"] == EventKind.WORKFLOW_STARTED]
    return [(s, starts[k + 1] if k + 1 < len(starts) else len(dicts)) for k, s in enumerate(starts)]


def _recorded(dicts: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    out = []
    for e in dicts:
        action = EventKind(e["kind"]).made_by
        if action is None:
            continue
        name = e.get("name", "")
        if action is ActionKind.COMPLETE_WORKFLOW:
            name = e.get("workflowStatus", "")
        elif action is ActionKind.CREATE_DETACHED_WORKFLOW:
            name = e.get("instanceId", "")  # its event records no name: the spawn is known by its instance
        out.append((action.value, e["eventId"], name))
    return out


def _answered(answer: dict[str, Any]) -> list[tuple[str, int, str]]:
    out = []
    for a in answer["actions"]:
        (kind, body), = a.items()
        name = body.get("name", "")
        if kind == ActionKind.COMPLETE_WORKFLOW:
            name = body.get("workflowStatus", "")
        elif kind == ActionKind.CREATE_DETACHED_WORKFLOW:
            name = body.get("instanceId", "")
        out.append((kind, body.get("id", 0), name))
    return out


@check("replay_determinism")
def replay_determinism(obs: FlowObservation) -> None:
    """Every committed turn, replayed on a fresh worker, gives the actions history recorded for it."""
    if obs.replay is None:
        fail(obs, "replay_determinism", [Mismatch(text="this worker target cannot replay histories (no replay channel)",
                                                  subject=Subject.DETERMINISM)])
        return
    out = []
    for iid, dicts in obs.histories.items():
        raw = obs.raw_histories.get(iid, [])
        for start, end in turns(raw, dicts):
            turn = dicts[start:end]
            if any(e["kind"] in (EventKind.EXECUTION_TERMINATED, EventKind.EXECUTION_STALLED) for e in turn):
                continue  # the engine enforces terminations itself (R3.16); stalls are not turns
            new = [raw[i] for i in range(start, end) if not EventKind(dicts[i]["kind"]).produced]
            answer = obs.replay(iid, raw[:start], new)
            if answer is None:
                out.append(Mismatch(text=f"{iid} turn at event #{start}: the worker did not answer the replayed turn",
                                    requirement=ANSWERED, subject=Subject.ANSWER, instance=iid))
                continue
            want, got = _recorded(turn), _answered(answer)
            if want != got:  # the worker's own history: its own ids and names, so any difference breaks the MUST
                out.append(Mismatch(text=f"{iid} turn at event #{start}: history recorded {want}, replay answered "
                                         f"{got}", requirement=SELF_DETERMINISM, subject=Subject.DETERMINISM,
                                    instance=iid))
    fail(obs, "replay_determinism", out)


@check("same_item_twice")
def same_item_twice(obs: FlowObservation) -> None:
    """The same work item sent twice gets identical answers."""
    if obs.replay is None:
        fail(obs, "same_item_twice", [Mismatch(text="this worker target cannot replay histories (no replay channel)",
                                               subject=Subject.DETERMINISM)])
        return
    out = []
    for iid, dicts in obs.histories.items():
        raw = obs.raw_histories.get(iid, [])
        spans = turns(raw, dicts)
        if not spans:
            continue
        start, end = spans[-1]
        new = [raw[i] for i in range(start, end) if not EventKind(dicts[i]["kind"]).produced]
        first, second = obs.replay(iid, raw[:start], new), obs.replay(iid, raw[:start], new)
        if first != second:
            out.append(Mismatch(text=f"{iid}: two answers to the same turn differ:\n      {json.dumps(first)}\n"
                                     f"      {json.dumps(second)}", requirement=SELF_DETERMINISM,
                                subject=Subject.DETERMINISM, instance=iid))
    fail(obs, "same_item_twice", out)


@check("zombie_rejected")
def zombie_rejected(obs: FlowObservation) -> None:
    """Stale completions change nothing: no result sent with a stale token reaches history."""
    out = []
    if not obs.zombie_results:
        out.append(Mismatch(text="the scenario sent no stale completion, so zombie rejection was not exercised",
                            subject=Subject.ZOMBIE))
    for iid, dicts in obs.histories.items():
        for i, e in enumerate(dicts):
            if EventKind(e["kind"]).resolves is Operation.TASK and json.dumps(e.get("result")) in obs.zombie_results:
                out.append(Mismatch(text=f"{iid} event #{i}: {e['kind']} carries the zombie's result {e.get('result')!r}",
                                    subject=Subject.ZOMBIE, instance=iid))
    fail(obs, "zombie_rejected", out)


@check("vector", vector=True)
def vector(obs: VectorObservation) -> None:
    """A turn-level vector: the worker's actions (in order), custom status and version.

    Each mismatch of the actions carries the level the contract gives it (conformance.verdict):
    kinds, names, payloads, due times and completions are the program's semantics; ids, child ids,
    timer names, error types and empty-versus-unset strings are the worker's choice (observations).
    """
    vec = obs.scenario.vector
    assert vec is not None
    answer = obs.answer
    if answer is None:
        # On a history no engine writes for this worker, answering at all is robustness: a SHOULD.
        fail(obs, "vector", [Mismatch(text="the worker did not answer the vector's turn in time", requirement=ANSWERED,
                                      level=Level.SHOULD if obs.foreign else None, subject=Subject.ANSWER)])
        return
    expected = vec.actions if obs.expected is None else obs.expected
    m = Matcher()
    out: list[Mismatch] = []
    actions = answer["actions"]
    if obs.held and not actions and expected:
        # Suspended at the end of the turn: no actions is the contract's answer (EVT-SUSP-001), the reference's
        # (acting on the events before the suspension) another one; the held work follows the resume.
        fail(obs, "vector", [Mismatch(text=f"no actions where the reference answers {len(expected)}: the turn leaves "
                                           "the instance suspended and the worker holds its actions until the "
                                           "resume (EVT-SUSP-001)", level=Level.OBSERVATION, field="actions",
                                           subject=Subject.ACTIONS)])
        return
    if len(actions) != len(expected):
        out.append(Mismatch(text=f"expected {len(expected)} action(s), got {len(actions)}: {json.dumps(actions)}",
                            field="actions", subject=Subject.ACTIONS))
    for i, (want, got) in enumerate(zip(expected, actions)):
        out += [classify_answer_mismatch(x) for x in m.diffs(want, got, f"actions[{i}]")]
    out += stale_actions(actions, obs.recorded)
    if vec.custom_status is not MISSING:
        out += [Mismatch(text=x, field="custom_status", subject=Subject.CUSTOM_STATUS)
                for x in m.match(vec.custom_status, answer.get("custom_status"), "custom_status")]
    if vec.version is not None:
        out += [Mismatch(text=x, field="version", subject=Subject.VERSION)
                for x in m.match(dict(vec.version), answer.get("version") or {}, "version")]
    why = (f"a history no engine writes for this worker ({obs.foreign})" if obs.foreign else
           "the turn delivers ExecutionTerminated: the engine terminates the instance and applies none of the "
           "answer (R3.16)" if obs.overridden else "")
    if why and out:
        # Either no engine sends this worker the history, or no engine applies the answer: only observations.
        out = [replace(x, level=Level.OBSERVATION) for x in out]
        out.append(Mismatch(text=f"({why}: compared as an observation)", level=Level.OBSERVATION,
                            subject=Subject.ACTIONS))
    if out and obs.note:
        # The note weighs what the mismatches weigh: it must not turn observations into a failure.
        # It goes where the first of them goes (its subject), and weighs what they weigh.
        levels = [x.level for x in out]
        strongest = None if None in levels else min(levels, key=list(Level).index)
        out.append(Mismatch(text=f"(the vector was {obs.note})", level=strongest, subject=out[0].subject))
    fail(obs, "vector", out)


def stale_actions(actions: list[dict[str, Any]], recorded: Mapping[int, tuple[str, str]]) -> list[Mismatch]:
    """Actions answered at an id the history already holds for another action. The engine creates no
    event for such an action (HIST-EVENTID-001), so what the code did there is lost: the turn is not
    answered with what the workflow code does (RPL-EXEC-001), whatever the ids' layout (RPL-IDS-001).
    The same action at its recorded id is a re-sent one, not stale; a completion ends the instance
    whatever its id."""
    out = []
    for i, a in enumerate(actions):
        (kind, body), = a.items()
        held = None if kind == ActionKind.COMPLETE_WORKFLOW else recorded.get(body.get("id", 0))
        if held is not None and held != (kind, body.get("name", "")):
            out.append(Mismatch(
                text=f"actions[{i}]: {kind} {body.get('name', '')!r} answered at id {body.get('id', 0)}, which the "
                     f"history already holds for {held[0]} {held[1]!r}: an engine records nothing for it "
                     "(HIST-EVENTID-001), so the workflow's step is lost (a stale answer)",
                requirement=EXECUTES, field="actions", subject=Subject.ACTIONS))
    return out


@check("distinct_task_execution_ids", vector=True)
def distinct_task_execution_ids(obs: VectorObservation) -> None:
    """The taskExecutionIds a worker puts in its ScheduleTask actions differ per call (their values are its own)."""
    seen: dict[str, int] = {}
    out = []
    for i, a in enumerate((obs.answer or {}).get("actions", [])):
        teid = (a.get(ActionKind.SCHEDULE_TASK) or {}).get("taskExecutionId")
        if not teid:
            continue  # none sent: the sidecar makes one (seed 000 task_execution_id)
        if teid in seen:
            out.append(Mismatch(text=f"actions[{i}].ScheduleTask.taskExecutionId {teid!r} repeats actions[{seen[teid]}]'s",
                                requirement=DISTINCT_TEIDS, subject=Subject.TASK_EXECUTION_ID))
        seen.setdefault(teid, i)
    fail(obs, "distinct_task_execution_ids", out)
