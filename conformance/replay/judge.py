"""Pure judgement of one replayed turn: the worker's answer against what history recorded next.

The answer is read in the engine's view (`conformance.dialects.compare.normalise`: only the first
completion counts, nothing after continue-as-new, default child ids filled in), and the patch and
version rules are the reference engine's own (`taskhub_core.turn.decide_turn`, which stalls
exactly as dapr/dapr does), so a replay stalls where daprd would and with daprd's description.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from taskhub_core.history import Facts, first_version_name
from taskhub_core.state import InstanceState
from taskhub_core.patches import REFUSALS_BEFORE_STALL, refusal_stall
from taskhub_core.turn import TurnKind, decide_turn
from taskhub_wire import pb
from taskhub_wire.kinds import RESOLVING_FIELDS, ActionKind, EventKind, pascal

from conformance.dialects.compare import EXACT, Profile, normalise
from conformance.replay.turns import ACTION_EVENTS
from conformance.replay.turns import Turn


class Verdict(enum.Enum):
    CLEAN = "replays cleanly"
    NONDETERMINISM = "nondeterminism"
    STALL = "would stall"
    NOT_REGISTERED = "workflow not registered"
    ERROR = "error"  # no answer, a malformed answer, an unreadable history

    @property
    def ok(self) -> bool:
        return self is Verdict.CLEAN


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """The first place the code and the history disagree."""

    verdict: Verdict
    turn: int
    event_index: int | None  # position in the history file's events (0-based)
    summary: str
    history_side: tuple[str, ...] = ()  # the turn's events, one line each
    code_side: tuple[str, ...] = ()  # the answer's actions, one line each
    stall_reason: str | None = None
    stall_description: str | None = None
    answer: dict[str, Any] = field(default_factory=dict)


# How each SDK fails a turn whose workflow it does not know (errorType + ": " + errorMessage):
# Python SDKs "OrchestratorNotRegisteredError: A 'x' orchestrator was not registered.", durabletask-js
# "OrchestratorNotRegisteredError: ...", Go "workflow named 'x' is not registered", Java
# "java.lang.IllegalStateException: No factory found for orchestrator: x".
_NOT_REGISTERED = re.compile(r"not\s*registered|notregistered|no factory found for orchestrator"
                             r"|no (?:such )?(?:orchestrator|workflow)\b", re.I)


def _status(value: Any) -> str:
    if isinstance(value, int):
        value = pb.OrchestrationStatus.Name(value)
    return str(value or "").removeprefix("ORCHESTRATION_STATUS_")


def _payload(value: Any) -> Any:
    """A payload as its JSON value (the SDKs' JSON encoders space differently)."""
    if isinstance(value, dict) and set(value) <= {"json", "raw"}:
        return value.get("json", value.get("raw"))
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _action_of(event_field: str) -> str:
    """The action field an action-made event's field is recorded for."""
    made_by = EventKind.from_field(event_field).made_by
    assert made_by is not None, event_field
    return made_by.field


def describe_event(ev: pb.HistoryEvent) -> str:
    kind = ev.WhichOneof("eventType") or "?"
    body = getattr(ev, kind) if kind != "?" else None
    name = ""
    if kind == EventKind.EXECUTION_COMPLETED.field:
        extra = _status(body.workflowStatus)
        if body.HasField("result"):
            extra += f" result={_short(_payload(body.result.value))}"
        if body.HasField("failureDetails"):
            extra += f" {body.failureDetails.errorType}: {_short(body.failureDetails.errorMessage, 60)}"
        return f"ExecutionCompleted {extra}"
    if body is not None and getattr(body, "name", ""):
        name = f" '{body.name}'"
    if kind in RESOLVING_FIELDS and kind != EventKind.TIMER_FIRED.field:
        return f"{pascal(kind)} for id {body.taskScheduledId}"
    if kind == EventKind.TIMER_FIRED.field:
        return f"TimerFired for id {body.timerId}"
    if kind == EventKind.WORKFLOW_STARTED.field and body.HasField("version"):
        v = body.version
        return f"WorkflowStarted version={v.name or '-'} patches={list(v.patches)}"
    ident = f" id {ev.eventId}" if kind in ACTION_EVENTS else ""
    return f"{pascal(kind)}{name}{ident}"


def describe_action(a: dict[str, Any]) -> str:
    kind = next((k for k in a if k != "id"), "?")
    body = a.get(kind) or {}
    if kind == ActionKind.COMPLETE_WORKFLOW.field:
        extra = _status(body.get("workflowStatus"))
        if "result" in body:
            extra += f" result={_short(_payload(body['result']))}"
        fd = body.get("failureDetails")
        if fd:
            extra += f" {fd.get('errorType', '')}"
        return f"CompleteWorkflow {extra}"
    name = f" '{body['name']}'" if isinstance(body, dict) and body.get("name") else ""
    return f"{pascal(kind)}{name} id {a.get('id', 0)}"


def instance_for(instance_id: str, name: str, past: Sequence[pb.HistoryEvent]) -> InstanceState:
    """The engine's view of an instance whose committed history is `past`."""
    return InstanceState(iid=instance_id, name=name, history=tuple(past), facts=Facts().extended(past))


def _lines(events: Sequence[pb.HistoryEvent], turn: Turn, mark: int | None) -> tuple[str, ...]:
    return tuple(f"{'>' if i == mark else ' '} #{i:<3} {describe_event(events[i])}"
                 for i in range(turn.start, turn.end))


def _raw_failure(resp: pb.WorkflowResponse) -> str:
    for a in resp.actions:
        if a.HasField("completeWorkflow") and a.completeWorkflow.HasField("failureDetails"):
            fd = a.completeWorkflow.failureDetails
            return f"{fd.errorType}: {fd.errorMessage}"
    return ""


def judge_turn(*, events: Sequence[pb.HistoryEvent], turn: Turn, instance_id: str, name: str,
               past: Sequence[pb.HistoryEvent], new: Sequence[pb.HistoryEvent], resp: pb.WorkflowResponse | None,
               profile: Profile = EXACT) -> Divergence | None:
    """None when the answer is what history recorded for `turn`; else the first divergence."""
    if resp is None:
        return Divergence(verdict=Verdict.ERROR, turn=turn.number, event_index=turn.start,
                          summary="the worker did not answer this turn in time (is the workflow's code blocked, "
                                  "or did the worker crash? see its log)",
                          history_side=_lines(events, turn, None))
    norm = normalise(resp, profile)
    actions = norm["actions"]
    code = tuple(describe_action(a) for a in actions) or ("(no actions)",)
    failure = _raw_failure(resp)
    recorded_failure = any(events[i].HasField("executionCompleted")
                           and events[i].executionCompleted.HasField("failureDetails")
                           and _NOT_REGISTERED.search(events[i].executionCompleted.failureDetails.errorType + " "
                                                      + events[i].executionCompleted.failureDetails.errorMessage)
                           for i in turn.recorded)
    if failure and _NOT_REGISTERED.search(failure) and not recorded_failure:
        return Divergence(verdict=Verdict.NOT_REGISTERED, turn=turn.number, event_index=turn.start,
                          summary=f"workflow '{name}' is not registered in this code (the worker answers {failure})",
                          history_side=_lines(events, turn, None), code_side=code + (failure,), answer=norm)
    outcome = decide_turn(instance_for(instance_id, name, past), list(new), resp, now_ns=0)
    if outcome.kind is TurnKind.STALL:
        assert outcome.stall is not None
        reason = pb.StalledReason.Name(outcome.stall[0])
        return Divergence(verdict=Verdict.STALL, turn=turn.number, event_index=turn.start,
                          summary=f"the engine would stall the instance: {reason}: {outcome.stall[1]}",
                          history_side=_lines(events, turn, turn.start), code_side=code + (_version_line(norm),),
                          stall_reason=reason, stall_description=outcome.stall[1], answer=norm)
    if outcome.kind is TurnKind.ABANDON:
        # What the live engine does with an answer it refuses: redelivery, then a stall (R3.14 b).
        reason, description = refusal_stall(outcome.reason, refusals=REFUSALS_BEFORE_STALL)
        return Divergence(verdict=Verdict.STALL, turn=turn.number, event_index=turn.start,
                          summary=f"the engine refuses this answer ({outcome.reason}) and stalls the instance "
                                  f"after {REFUSALS_BEFORE_STALL} refusals in a row",
                          history_side=_lines(events, turn, None), code_side=code,
                          stall_reason=pb.StalledReason.Name(reason), stall_description=description, answer=norm)
    recorded_version, version = first_version_name(list(past)), norm["version.name"]
    if recorded_version and version and version != recorded_version:
        return Divergence(verdict=Verdict.NONDETERMINISM, turn=turn.number, event_index=turn.start,
                          summary=f"history runs version '{recorded_version}' of '{name}'; the code answers as "
                                  f"version '{version}'",
                          history_side=_lines(events, turn, turn.start), code_side=code + (_version_line(norm),),
                          answer=norm)
    return _compare_actions(events=events, turn=turn, norm=norm, code=code, failure=failure)


def _version_line(norm: dict[str, Any]) -> str:
    return f"version={norm['version.name'] or '-'} patches={norm['version.patches']}"


def _compare_actions(*, events: Sequence[pb.HistoryEvent], turn: Turn, norm: dict[str, Any],
                     code: tuple[str, ...], failure: str) -> Divergence | None:
    actions = norm["actions"]
    completion = next((a for a in actions if ActionKind.COMPLETE_WORKFLOW.field in a), None)
    by_id = {a.get("id", 0): a for a in actions if ActionKind.COMPLETE_WORKFLOW.field not in a}
    matched: set[int] = set()

    def diverge(index: int, summary: str) -> Divergence:
        extra = (f"(the worker's failure: {failure})",) if failure else ()
        return Divergence(verdict=Verdict.NONDETERMINISM, turn=turn.number, event_index=index, summary=summary,
                          history_side=_lines(events, turn, index), code_side=code + extra, answer=norm)

    for i in turn.recorded:
        ev = events[i]
        kind = ev.WhichOneof("eventType")
        if kind == EventKind.EXECUTION_COMPLETED.field:
            rec = ev.executionCompleted
            if completion is None:
                return diverge(i, f"history completes the workflow ({describe_event(ev)}); the code does not: "
                                  f"{', '.join(code)}")
            cw = completion["completeWorkflow"]
            if _status(cw.get("workflowStatus")) != _status(rec.workflowStatus):
                return diverge(i, f"history: {describe_event(ev)}; the code: {describe_action(completion)}")
            if rec.HasField("result") and _payload(cw.get("result")) != _payload(rec.result.value):
                return diverge(i, f"history completes with result {_short(_payload(rec.result.value))}; the code "
                                  f"with {_short(_payload(cw.get('result')))}")
            rec_type = rec.failureDetails.errorType if rec.HasField("failureDetails") else ""
            got_type = (cw.get("failureDetails") or {}).get("errorType", "")
            if rec_type and got_type and rec_type != got_type:
                return diverge(i, f"history fails with {rec_type}; the code with {got_type}")
            completion = None  # matched
            continue
        a = by_id.get(ev.eventId)
        want = _action_of(kind)
        if a is None:
            return diverge(i, f"history: {describe_event(ev)}; the code has no action with id {ev.eventId} "
                              f"(it answers: {', '.join(code)})")
        got_kind = next(k for k in a if k != "id")
        if got_kind != want:
            return diverge(i, f"history: {describe_event(ev)}; the code: {describe_action(a)}")
        rec_name = getattr(getattr(ev, kind), "name", "")
        got_name = (a.get(got_kind) or {}).get("name", "")
        if rec_name and rec_name != got_name:
            return diverge(i, f"history: {describe_event(ev)}; the code: {describe_action(a)}")
        matched.add(ev.eventId)
    extra = [a for a in actions if ActionKind.COMPLETE_WORKFLOW.field not in a and a.get("id", 0) not in matched]
    completed = any(e.HasField("executionCompleted") for e in events)
    for a in extra:
        # An action history records only in a later turn: the SDKs accept it made early, if it is the
        # same action; a different one with that id fails the replay where history records it.
        later = next((j for j in range(turn.end, len(events))
                      if events[j].WhichOneof("eventType") in ACTION_EVENTS
                      and not events[j].HasField("executionCompleted") and events[j].eventId == a.get("id", 0)), None)
        if later is not None:
            ev = events[later]
            kind = ev.WhichOneof("eventType")
            got_kind = next(k for k in a if k != "id")
            rec_name = getattr(getattr(ev, kind), "name", "")
            if got_kind != _action_of(kind) or (rec_name and rec_name != (a.get(got_kind) or {}).get("name", "")):
                return diverge(later, f"history: {describe_event(ev)} (turn {_turn_of(events, later)}); the code "
                                      f"makes {describe_action(a)} in turn {turn.number}")
            continue
        if completed:
            # History never records it: the replay fails at the next action history does record.
            nxt = next((j for j in range(turn.end, len(events)) if events[j].WhichOneof("eventType") in ACTION_EVENTS),
                       min(turn.end, len(events)))
            recorded = ", ".join(describe_event(events[i]) for i in turn.recorded) or "nothing"
            at = f"history: {describe_event(events[nxt])}; " if nxt < len(events) else ""
            return diverge(nxt, f"{at}the code makes {describe_action(a)} in turn {turn.number}, an action history "
                                f"never records (turn {turn.number} recorded: {recorded})")
        # Past the end of a running instance's history: what the code does next, not a divergence.
    if completion is not None and completed:
        return diverge(min(turn.end, len(events)), f"the code completes the workflow in turn {turn.number} "
                                                   f"({describe_action(completion)}); history does not")
    return None


def _turn_of(events: Sequence[pb.HistoryEvent], index: int) -> int:
    return sum(1 for e in events[: index + 1] if e.HasField("workflowStarted")) or 1
