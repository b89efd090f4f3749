"""Turning a worker's WorkflowResponse into history, dispatches and messages.

Pure: `decide_turn` reads an instance and a response and returns an `Outcome`;
the engine commits it. The rules are those of engine-rules.md §2, §3 and §7
(patch checks and stalls as dapr/dapr does them, REF choices where the real
engines differ).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from taskhub_wire import pb

from fake_sidecar.engine.model import TERMINAL, Instance, TurnDecision, ts

COMMIT, STALL, ABANDON = TurnDecision.COMMIT, TurnDecision.STALL, TurnDecision.ABANDON

# Completion statuses a worker may report; anything else is a malformed action.
_COMPLETION_STATUSES = TERMINAL | {pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW}


@dataclass(frozen=True)
class ChildStart:
    iid: str
    start: pb.HistoryEvent  # ExecutionStarted
    parent_task_id: int
    detached: bool = False


@dataclass
class Outcome:
    kind: TurnDecision
    events: list[pb.HistoryEvent] = field(default_factory=list)
    stall: tuple[int, str] | None = None
    reason: str = ""
    custom_status: str | None = None
    activities: list[pb.ActivityRequest] = field(default_factory=list)
    timers: list[tuple[int, pb.HistoryEvent]] = field(default_factory=list)  # (timer id, TimerFired)
    children: list[ChildStart] = field(default_factory=list)
    sends: list[tuple[str, pb.HistoryEvent]] = field(default_factory=list)
    completed: pb.HistoryEvent | None = None
    continue_as_new: tuple[str | None, list[pb.HistoryEvent]] | None = None
    terminate_cascade: tuple[str | None, bool] | None = None  # (output, recurse)
    cancel_event_timers: list[str] = field(default_factory=list)


def history_patches(history: list[pb.HistoryEvent]) -> list[str]:
    """All patches recorded in history, in order (each WorkflowStarted keeps only new ones)."""
    out: list[str] = []
    for ev in history:
        if ev.HasField("workflowStarted") and ev.workflowStarted.HasField("version"):
            out.extend(ev.workflowStarted.version.patches)
    return out


def first_version_name(history: list[pb.HistoryEvent]) -> str:
    for ev in history:
        if ev.HasField("workflowStarted"):
            v = ev.workflowStarted.version
            return v.name if ev.workflowStarted.HasField("version") and v.HasField("name") else ""
    return ""


def child_instance_id(parent: str, action_id: int) -> str:
    """R3.5: `<parent>:` + the last four hex digits of 0x10000 + action id."""
    return f"{parent}:{(0x10000 + action_id) & 0xFFFF:04x}"


def _resolution_key(ev: pb.HistoryEvent) -> tuple[str, int] | None:
    kind = ev.WhichOneof("eventType")
    if kind == "taskCompleted":
        return ("task", ev.taskCompleted.taskScheduledId)
    if kind == "taskFailed":
        return ("task", ev.taskFailed.taskScheduledId)
    if kind == "timerFired":
        return ("timer", ev.timerFired.timerId)
    if kind == "childWorkflowInstanceCompleted":
        return ("child", ev.childWorkflowInstanceCompleted.taskScheduledId)
    if kind == "childWorkflowInstanceFailed":
        return ("child", ev.childWorkflowInstanceFailed.taskScheduledId)
    return None


def resolution_key(ev: pb.HistoryEvent) -> tuple[str, int] | None:
    return _resolution_key(ev)


def absorb(inst: Instance, ev: pb.HistoryEvent) -> None:
    """Update the derived fields of `inst` for one committed history event (the caller keeps the
    history itself)."""
    kind = ev.WhichOneof("eventType")
    if kind == "executionStarted":
        inst.started = True
        inst.continuing = False
    elif kind == "executionCompleted":
        inst.completed = ev
    elif kind == "executionSuspended":
        inst.suspended = True
    elif kind == "executionResumed":
        inst.suspended = False
    elif kind == "taskScheduled":
        inst.opened["task"].add(ev.eventId)
    elif kind == "timerCreated":
        inst.opened["timer"].add(ev.eventId)
        origin = ev.timerCreated.WhichOneof("origin")
        if origin == "externalEvent":
            inst.timer_event_names[ev.eventId] = ev.timerCreated.externalEvent.name
        elif origin is None and ev.timerCreated.HasField("name"):
            inst.timer_event_names[ev.eventId] = ev.timerCreated.name
    elif kind == "childWorkflowInstanceCreated":
        inst.opened["child"].add(ev.eventId)
        inst.children.append(ev.childWorkflowInstanceCreated.instanceId)
    elif kind == "workflowStarted" and ev.workflowStarted.HasField("version"):
        inst.patches.extend(ev.workflowStarted.version.patches)
    key = resolution_key(ev)
    if key is not None:
        inst.resolved.add(key)
    if kind != "executionStalled":
        inst.stalled = None  # any committed event other than a stall clears it (R1.4)


def decide_turn(inst: Instance, new_events: list[pb.HistoryEvent], resp: pb.WorkflowResponse, *,
                now_ns: int) -> Outcome:
    """Apply `resp` to the turn whose delivered events are `new_events` (WorkflowStarted first)."""
    custom = resp.customStatus.value if resp.HasField("customStatus") else None
    actions = list(resp.actions)

    # Malformed actions abandon the turn (R3.13): it is redelivered, the RPC still answers OK.
    for a in actions:
        kind = a.WhichOneof("workflowActionType")
        if kind is None:
            return Outcome(ABANDON, reason=f"action id {a.id} has no action type set")
        if kind == "completeWorkflow" and a.completeWorkflow.workflowStatus not in _COMPLETION_STATUSES:
            name = status_name(a.completeWorkflow.workflowStatus)
            return Outcome(ABANDON, reason=f"action id {a.id} completes the workflow with non-final status {name}")
        if kind == "completeWorkflow":
            # Only external events are carried into the next generation (the SDKs carry nothing else);
            # anything else could forge a completion or a start.
            odd = [e.WhichOneof("eventType") for e in a.completeWorkflow.carryoverEvents
                   if not e.HasField("eventRaised")]
            if odd:
                return Outcome(ABANDON, reason=f"action id {a.id} carries over {odd}; only eventRaised events "
                                               "can be carried into a new generation")
        if kind == "createDetachedWorkflow" and not a.createDetachedWorkflow.instanceId:
            return Outcome(ABANDON, reason=f"action id {a.id} creates a detached workflow without an instance id")
        if kind == "scheduleTask" and not a.scheduleTask.name:
            return Outcome(ABANDON, reason=f"action id {a.id} schedules an activity without a name")
        if kind == "createChildWorkflow" and not a.createChildWorkflow.name:
            return Outcome(ABANDON, reason=f"action id {a.id} creates a child workflow without a name")

    # R3.14: an action id already used by an operation in committed history means a stale answer
    # (ids are one sequence per generation, whatever the kind of operation).
    used = inst.opened["task"] | inst.opened["timer"] | inst.opened["child"]
    for a in actions:
        kind = a.WhichOneof("workflowActionType")
        if kind in ("scheduleTask", "createTimer", "createChildWorkflow") and a.id in used:
            return Outcome(ABANDON, reason=f"action id {a.id} ({kind}) is already in history: stale turn")

    # §7: version-not-available, then patch prefix check.
    if any(a.HasField("workflowVersionNotAvailable") for a in actions):
        return Outcome(STALL, stall=(pb.VERSION_NOT_AVAILABLE,
                                     f"Version not available: {first_version_name(inst.history)}"))
    recorded = inst.patches
    current = list(resp.version.patches) if resp.HasField("version") else []
    if recorded and current[: len(recorded)] != recorded:
        desc = (f"Patch mismatch. History patches: [{', '.join(recorded)}], "
                f"current patches: [{', '.join(current)}]. ")
        return Outcome(STALL, stall=(pb.PATCH_MISMATCH, desc))

    events = [_copy(e) for e in new_events]
    started = events[0]
    if resp.HasField("version") and (resp.version.patches or resp.version.HasField("name")):
        # Keep only patches new to history (multiset difference, R3.15), in first-seen order.
        left = Counter(recorded)
        ordered = []
        for p in current:
            if left[p] > 0:
                left[p] -= 1
            else:
                ordered.append(p)
        if ordered or resp.version.HasField("name"):
            v = started.workflowStarted.version
            v.patches.extend(ordered)
            if resp.version.HasField("name"):
                # dapr/dapr drops the name when compacting; the reference keeps it (hazard in
                # patching-and-stall.md §2).
                v.name = resp.version.name

    # R2.8: resolutions without a matching operation are delivered, never committed.
    events = [e for e in events if not _unmatched(inst, e)]

    terminate = next((e for e in events if e.HasField("executionTerminated")), None)
    out = Outcome(COMMIT, custom_status=custom)
    completed: pb.HistoryEvent | None = None
    for a in actions:
        kind = a.WhichOneof("workflowActionType")
        if completed is not None:
            # R3.1 REF: a completion is final; durabletask-go still records later actions after
            # ExecutionCompleted, the reference drops them (first completion wins).
            continue
        if kind == "completeWorkflow":
            if out.continue_as_new is not None:
                continue
            cw = a.completeWorkflow
            if cw.workflowStatus == pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
                if terminate is not None:
                    continue  # R3.16 (a): a terminate in the batch strips continue-as-new
                out.continue_as_new = (cw.result.value if cw.HasField("result") else None,
                                       [_copy(e) for e in cw.carryoverEvents])
                break  # later actions are discarded (R3.1)
            ev = pb.HistoryEvent(eventId=a.id, timestamp=ts(now_ns))
            ev.executionCompleted.workflowStatus = cw.workflowStatus
            if cw.HasField("result"):
                ev.executionCompleted.result.CopyFrom(cw.result)
            if cw.HasField("failureDetails"):
                ev.executionCompleted.failureDetails.CopyFrom(cw.failureDetails)
            events.append(ev)
            completed = ev
        elif kind == "scheduleTask":
            st = a.scheduleTask
            ev = pb.HistoryEvent(eventId=a.id, timestamp=ts(now_ns))
            ts_ev = ev.taskScheduled
            ts_ev.name = st.name
            if st.HasField("version"):
                ts_ev.version.CopyFrom(st.version)
            if st.HasField("input"):
                ts_ev.input.CopyFrom(st.input)
            ts_ev.taskExecutionId = st.taskExecutionId
            if st.HasField("historyPropagationScope"):
                ts_ev.historyPropagationScope = st.historyPropagationScope
            events.append(ev)
            req = pb.ActivityRequest(name=st.name, taskId=a.id, taskExecutionId=st.taskExecutionId)
            if st.HasField("version"):
                req.version.CopyFrom(st.version)
            if st.HasField("input"):
                req.input.CopyFrom(st.input)
            req.workflowInstance.instanceId = inst.iid
            out.activities.append(req)
        elif kind == "createTimer":
            ct = a.createTimer
            ev = pb.HistoryEvent(eventId=a.id, timestamp=ts(now_ns))
            tc = ev.timerCreated
            tc.fireAt.CopyFrom(ct.fireAt)
            if ct.HasField("name"):
                tc.name = ct.name
            origin = ct.WhichOneof("origin")
            if origin is not None:
                getattr(tc, origin).CopyFrom(getattr(ct, origin))
            events.append(ev)
            fired = pb.HistoryEvent(eventId=-1)
            fired.timerFired.timerId = a.id
            fired.timerFired.fireAt.CopyFrom(ct.fireAt)
            out.timers.append((a.id, fired))
        elif kind == "createChildWorkflow":
            cc = a.createChildWorkflow
            child_id = cc.instanceId or child_instance_id(inst.iid, a.id)
            ev = pb.HistoryEvent(eventId=a.id, timestamp=ts(now_ns))
            ce = ev.childWorkflowInstanceCreated
            ce.instanceId = child_id
            ce.name = cc.name
            if cc.HasField("version"):
                ce.version.CopyFrom(cc.version)
            if cc.HasField("input"):
                ce.input.CopyFrom(cc.input)
            if cc.HasField("historyPropagationScope"):
                ce.historyPropagationScope = cc.historyPropagationScope
            events.append(ev)
            start = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
            es = start.executionStarted
            es.name = cc.name
            if cc.HasField("input"):
                es.input.CopyFrom(cc.input)
            es.workflowInstance.instanceId = child_id
            es.workflowInstance.executionId.value = uuid.uuid4().hex
            es.parentInstance.taskScheduledId = a.id
            es.parentInstance.name.value = inst.name
            es.parentInstance.workflowInstance.instanceId = inst.iid
            es.parentInstance.workflowInstance.executionId.value = inst.execution_id
            out.children.append(ChildStart(iid=child_id, start=start, parent_task_id=a.id))
        elif kind == "createDetachedWorkflow":
            cd = a.createDetachedWorkflow
            ev = pb.HistoryEvent(eventId=a.id, timestamp=ts(now_ns))
            ev.detachedWorkflowInstanceCreated.instanceId = cd.instanceId
            events.append(ev)
            start = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
            es = start.executionStarted
            es.name = cd.name
            if cd.HasField("input"):
                es.input.CopyFrom(cd.input)
            if cd.HasField("scheduledStartTimestamp"):
                es.scheduledStartTimestamp.CopyFrom(cd.scheduledStartTimestamp)
            for k, v in cd.tags.items():
                es.tags[k] = v
            es.workflowInstance.instanceId = cd.instanceId
            es.workflowInstance.executionId.value = (cd.executionId.value if cd.HasField("executionId")
                                                     and cd.executionId.value else uuid.uuid4().hex)
            out.children.append(ChildStart(iid=cd.instanceId, start=start, parent_task_id=a.id, detached=True))
        elif kind == "sendEvent":
            se = a.sendEvent
            ev = pb.HistoryEvent(eventId=a.id, timestamp=ts(now_ns))
            ev.eventSent.instanceId = se.instance.instanceId
            ev.eventSent.name = se.name
            if se.HasField("data"):
                ev.eventSent.input.CopyFrom(se.data)
            events.append(ev)
            # REF (R3.7): the target receives EventRaised, as classic DTFx does.
            raised = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
            raised.eventRaised.name = se.name
            if se.HasField("data"):
                raised.eventRaised.input.CopyFrom(se.data)
            out.sends.append((se.instance.instanceId, raised))
        elif kind == "terminateWorkflow":
            tw = a.terminateWorkflow
            term = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
            if tw.HasField("reason"):
                term.executionTerminated.input.CopyFrom(tw.reason)
            term.executionTerminated.recurse = tw.recurse
            out.sends.append((tw.instanceId, term))

    if terminate is not None:
        te = terminate.executionTerminated
        if completed is None:
            # R3.16 (b): the engine enforces the termination and drops what the turn produced.
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
            ev.executionCompleted.workflowStatus = pb.ORCHESTRATION_STATUS_TERMINATED
            if te.HasField("input"):
                ev.executionCompleted.result.CopyFrom(te.input)
            produced = {"taskScheduled", "timerCreated", "childWorkflowInstanceCreated", "eventSent",
                        "detachedWorkflowInstanceCreated"}
            events = [e for e in events if e.WhichOneof("eventType") not in produced]
            events.append(ev)
            completed = ev
            out.activities, out.timers, out.children, out.sends = [], [], [], []
        out.terminate_cascade = (te.input.value if te.HasField("input") else None, te.recurse)

    for e in events:
        if e.HasField("eventRaised"):
            out.cancel_event_timers.append(e.eventRaised.name)
    out.events = events
    out.completed = completed
    return out


def _unmatched(inst: Instance, ev: pb.HistoryEvent) -> bool:
    key = _resolution_key(ev)
    return key is not None and key[1] not in inst.opened[key[0]]


def _copy(ev: pb.HistoryEvent) -> pb.HistoryEvent:
    out = pb.HistoryEvent()
    out.CopyFrom(ev)
    return out


def payload_size(inst: Instance) -> int:
    return sum(e.ByteSize() for e in inst.history) + sum(e.event.ByteSize() for e in inst.inbox)


@dataclass(frozen=True)
class PayloadLimit:
    """The PAYLOAD_SIZE_EXCEEDED rule (daprd's 95 % of --max-body-size) and the flag that sets it."""

    limit: int
    flag: str

    def workflow_oversize(self, size: int) -> str | None:
        """The stall description when a turn of `size` bytes is too big to dispatch, else None."""
        if size <= 0.95 * self.limit:
            return None
        return (f"Workflow payload size {size} bytes exceeds 95% of max gRPC body size {self.limit} bytes; "
                f"increase {self.flag} and restart to resume")

    def activity_oversize(self, req: pb.ActivityRequest) -> str | None:
        size = req.ByteSize()
        if size <= 0.95 * self.limit:
            return None
        return (f"activity '{req.name}::{req.taskId}' payload {size} bytes exceeds 95% of max gRPC body size "
                f"{self.limit} bytes; increase {self.flag} and restart to resume")


def status_name(value: int) -> str:
    try:
        return pb.OrchestrationStatus.Name(value).removeprefix("ORCHESTRATION_STATUS_")
    except ValueError:
        return f"UNKNOWN_STATUS_{value}"
