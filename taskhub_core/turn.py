"""The decision on a worker's answer to a turn: commit it, stall the instance, or abandon the turn.

`decide_turn` runs the rules in the order the engine applies them (engine-rules.md §2, §3, §7):
a malformed answer is abandoned (R3.13), a stale one too (R3.14), a version or patch mismatch
stalls (§7); otherwise the turn's delivered events are recorded (with the reported version, and
without resolutions of nothing, R2.8), each action up to the first completion becomes its event
(`actions.RULES`), and a termination delivered in the turn is enforced (R3.16).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from taskhub_wire import pb
from taskhub_wire.kinds import OPENING_ACTION_FIELDS, OPENING_FIELDS, PRODUCED_FIELDS, ActionKind, EventKind

from taskhub_core import actions
from taskhub_core.actions import ChildStart, Context
from taskhub_core.history import TERMINAL, Facts, first_version_name, is_optional_timer, resolution_key, status_name
from taskhub_core.incidents import StaleAction
from taskhub_core.patches import Stall, patch_stall, record_version, version_stall
from taskhub_core.state import InstanceState
from taskhub_core.timestamps import copy_event, ts

# Completion statuses a worker may report; anything else is a malformed action.
_COMPLETION_STATUSES = TERMINAL | {pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW}
_OPENING = OPENING_ACTION_FIELDS


class TurnKind(enum.Enum):
    COMMIT = "commit"
    STALL = "stall"
    ABANDON = "abandon"


@dataclass(frozen=True)
class ContinueAsNew:
    input: str | None
    carry: tuple[pb.HistoryEvent, ...]


@dataclass(frozen=True)
class Cascade:
    """A termination delivered in the turn: its output, and whether it reaches the children."""

    output: str | None
    recurse: bool


@dataclass(frozen=True, kw_only=True)
class Decision:
    kind: TurnKind
    events: tuple[pb.HistoryEvent, ...] = ()
    stall: Stall | None = None
    reason: str = ""
    custom_status: str | None = None
    activities: tuple[pb.ActivityRequest, ...] = ()
    timers: tuple[tuple[int, pb.HistoryEvent], ...] = ()  # (timer id, TimerFired)
    children: tuple[ChildStart, ...] = ()
    sends: tuple[tuple[str, pb.HistoryEvent], ...] = ()
    completed: pb.HistoryEvent | None = None
    continue_as_new: ContinueAsNew | None = None
    terminate_cascade: Cascade | None = None
    cancel_event_timers: tuple[str, ...] = ()  # names of the EventRaised committed (R6.3)
    stale: StaleAction | None = None  # an abandoned stale answer's action (R3.14), as data
    malformed: bool = False  # an abandoned malformed answer (R3.13)


def abandon(reason: str, *, stale: StaleAction | None = None, malformed: bool = False) -> Decision:
    return Decision(kind=TurnKind.ABANDON, reason=reason, stale=stale, malformed=malformed)


def decide_turn(state: InstanceState, new_events: Sequence[pb.HistoryEvent], resp: pb.WorkflowResponse, *,
                now_ns: int, new_id: Callable[[], str] = lambda: uuid.uuid4().hex) -> Decision:
    """Apply `resp` to the turn whose delivered events are `new_events` (WorkflowStarted first)."""
    actions_ = list(resp.actions)
    bad = malformed(actions_)
    if bad:
        return abandon(bad, malformed=True)
    found = stale_action(actions_, state.history)
    if found is not None:
        return abandon(f"{found.text}: stale turn", stale=found)
    stall = (version_stall(resp, recorded_version=first_version_name(state.history))
             or patch_stall(resp, recorded=state.facts.patches))
    if stall is not None:
        return Decision(kind=TurnKind.STALL, stall=stall)
    events = delivered_events(new_events, resp, state.facts)
    terminate = next((e for e in events if e.HasField("executionTerminated")), None)
    ctx = Context(iid=state.iid, name=state.name, execution_id=state.execution_id, now_ns=now_ns, new_id=new_id,
                  trace=_trace_context(state.history, events))
    made = _Turn(events=events, custom_status=resp.customStatus.value if resp.HasField("customStatus") else None)
    record_actions(made, actions_, ctx, terminated=terminate is not None)
    if terminate is not None:
        enforce_termination(made, terminate.executionTerminated, now_ns=now_ns)
    return made.decision()


def _trace_context(history: Sequence[pb.HistoryEvent], events: Sequence[pb.HistoryEvent]) -> pb.TraceContext | None:
    """The parentTraceContext of the generation's ExecutionStarted (in history, or in this turn's events)."""
    for ev in (*history, *events):
        if ev.HasField("executionStarted"):
            es = ev.executionStarted
            return es.parentTraceContext if es.HasField("parentTraceContext") else None
    return None


# ----------------------------------------------------------------------------- the rules, in order


def malformed(actions_: Sequence[pb.WorkflowAction]) -> str:
    """R3.13: why the answer is malformed ("" if it is not); a malformed turn is redelivered."""
    for a in actions_:
        kind = a.WhichOneof("workflowActionType")
        problem = _MALFORMED[kind](a) if kind in _MALFORMED else ("has no action type set" if kind is None else "")
        if problem:
            return f"action id {a.id} {problem}"
    return ""


def _bad_completion(a: pb.WorkflowAction) -> str:
    cw = a.completeWorkflow
    if cw.workflowStatus not in _COMPLETION_STATUSES:
        return f"completes the workflow with non-final status {status_name(cw.workflowStatus)}"
    # Only external events are carried into the next generation (the SDKs carry nothing else);
    # anything else could forge a completion or a start.
    odd = [e.WhichOneof("eventType") for e in cw.carryoverEvents if not e.HasField("eventRaised")]
    if odd:
        return f"carries over {odd}; only eventRaised events can be carried into a new generation"
    return ""


_MALFORMED: dict[str, Callable[[pb.WorkflowAction], str]] = {
    ActionKind.COMPLETE_WORKFLOW.field: _bad_completion,
    ActionKind.CREATE_DETACHED_WORKFLOW.field: lambda a: "" if a.createDetachedWorkflow.instanceId
    else "creates a detached workflow without an instance id",
    ActionKind.SCHEDULE_TASK.field: lambda a: "" if a.scheduleTask.name else "schedules an activity without a name",
    ActionKind.CREATE_CHILD_WORKFLOW.field:
        lambda a: "" if a.createChildWorkflow.name else "creates a child workflow without a name",
}


# The results that say an operation failed: an action at such an id reads as a retry that reused it.
_FAILED_FIELDS = frozenset({EventKind.TASK_FAILED.field, EventKind.CHILD_WORKFLOW_INSTANCE_FAILED.field})


def stale(actions_: Sequence[pb.WorkflowAction], history: Sequence[pb.HistoryEvent]) -> str:
    """R3.14: why the answer is stale ("" if it is not): see `stale_action`."""
    found = stale_action(actions_, history)
    return f"{found.text}: stale turn" if found is not None else ""


def stale_action(actions_: Sequence[pb.WorkflowAction], history: Sequence[pb.HistoryEvent]) -> StaleAction | None:
    """R3.14: an action id already used by an operation in committed history means a stale answer
    (ids are one sequence per generation, whatever the kind of operation), except (a) where the id's
    holder is an optional timer (`is_optional_timer`): the SDK dropped it on replay and the engine
    records the new action at the same id, as daprd records every action."""
    holders = {e.eventId: e for e in history if e.WhichOneof("eventType") in OPENING_FIELDS}
    for a in actions_:
        kind = a.WhichOneof("workflowActionType")
        holder = holders.get(a.id) if kind in _OPENING else None
        if holder is not None and not is_optional_timer(holder):
            field_ = holder.WhichOneof("eventType")
            failed = any((key := resolution_key(e)) is not None and key.id == a.id
                         and e.WhichOneof("eventType") in _FAILED_FIELDS
                         for e in history)
            return StaleAction(id=a.id, kind=kind or "", holder=field_ or "",
                               holder_name=getattr(getattr(holder, field_), "name", "") if field_ else "",
                               holder_failed=failed)
    return None


def delivered_events(new_events: Sequence[pb.HistoryEvent], resp: pb.WorkflowResponse,
                     facts: Facts) -> list[pb.HistoryEvent]:
    """The turn's delivered events as history records them: the version in WorkflowStarted, and
    without resolutions of no operation (R2.8: those are delivered, never committed)."""
    events = [copy_event(e) for e in new_events]
    record_version(events[0], resp, recorded=facts.patches)
    return [e for e in events if not unmatched(facts, e)]


def unmatched(facts: Facts, ev: pb.HistoryEvent) -> bool:
    key = resolution_key(ev)
    return key is not None and key.id not in facts.opened[key.operation]


@dataclass
class _Turn:
    """A decision being made (frozen by `decision`)."""

    events: list[pb.HistoryEvent]
    custom_status: str | None
    activities: list[pb.ActivityRequest] = field(default_factory=list)
    timers: list[tuple[int, pb.HistoryEvent]] = field(default_factory=list)
    children: list[ChildStart] = field(default_factory=list)
    sends: list[tuple[str, pb.HistoryEvent]] = field(default_factory=list)
    completed: pb.HistoryEvent | None = None
    continue_as_new: ContinueAsNew | None = None
    cascade: Cascade | None = None

    def add(self, made: actions.Made) -> None:
        if made.event is not None:
            self.events.append(made.event)
        if made.activity is not None:
            self.activities.append(made.activity)
        if made.timer is not None:
            self.timers.append(made.timer)
        if made.child is not None:
            self.children.append(made.child)
        if made.send is not None:
            self.sends.append(made.send)

    def decision(self) -> Decision:
        return Decision(kind=TurnKind.COMMIT, events=tuple(self.events), custom_status=self.custom_status,
                        activities=tuple(self.activities), timers=tuple(self.timers), children=tuple(self.children),
                        sends=tuple(self.sends), completed=self.completed, continue_as_new=self.continue_as_new,
                        terminate_cascade=self.cascade,
                        cancel_event_timers=tuple(e.eventRaised.name for e in self.events if e.HasField("eventRaised")))


def record_actions(made: _Turn, actions_: Sequence[pb.WorkflowAction], ctx: Context, *, terminated: bool) -> None:
    """Each action becomes its event, in order, until the first completion (R3.1 REF: a completion
    is final; durabletask-go still records later actions, the reference drops them)."""
    for a in actions_:
        kind = a.WhichOneof("workflowActionType")
        if kind != ActionKind.COMPLETE_WORKFLOW.field:
            if kind in actions.RULES:
                made.add(actions.RULES[kind](a, ctx))
            continue
        cw = a.completeWorkflow
        if cw.workflowStatus != pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
            done = actions.complete(a, ctx)
            made.add(done)
            made.completed = done.event
            return
        if not terminated:  # R3.16 (a): a terminate in the batch strips continue-as-new
            made.continue_as_new = ContinueAsNew(input=cw.result.value if cw.HasField("result") else None,
                                                 carry=tuple(copy_event(e) for e in cw.carryoverEvents))
            return  # later actions are discarded (R3.1)


def enforce_termination(made: _Turn, te: pb.ExecutionTerminatedEvent, *, now_ns: int) -> None:
    """R3.16 (b): a termination delivered in the turn wins over what the turn produced."""
    if made.completed is None:
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
        ev.executionCompleted.workflowStatus = pb.ORCHESTRATION_STATUS_TERMINATED
        if te.HasField("input"):
            ev.executionCompleted.result.CopyFrom(te.input)
        made.events = [e for e in made.events if e.WhichOneof("eventType") not in PRODUCED_FIELDS] + [ev]
        made.completed = ev
        made.activities, made.timers, made.children, made.sends = [], [], [], []
    made.cascade = Cascade(output=te.input.value if te.HasField("input") else None, recurse=te.recurse)
