"""A worker's action as what the engine makes of it: the history event it records (eventId = the
action id), and the activity to dispatch, timer to fire, child to start or message to send.

One function per action kind; `RULES` maps the wire name of the kind to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp
from google.protobuf.wrappers_pb2 import StringValue

from taskhub_wire import pb
from taskhub_wire.kinds import ActionKind

from taskhub_core.timestamps import ts


def child_instance_id(parent: str, action_id: int) -> str:
    """R3.5: `<parent>:` + the last four hex digits of 0x10000 + action id."""
    return f"{parent}:{(0x10000 + action_id) & 0xFFFF:04x}"


@dataclass(frozen=True)
class ChildStart:
    iid: str
    start: pb.HistoryEvent  # ExecutionStarted
    parent_task_id: int
    detached: bool = False


@dataclass(frozen=True, kw_only=True)
class Context:
    """Who acts and when: the instance answering the turn, the turn's time, a maker of fresh ids."""

    iid: str
    name: str
    execution_id: str
    now_ns: int
    new_id: Callable[[], str]
    # The instance's trace context (its ExecutionStarted's parentTraceContext), passed on to what it
    # schedules and creates, as durabletask-go's applier passes the current one (applier.go:237, 276, 295).
    trace: pb.TraceContext | None = None


@dataclass(frozen=True, kw_only=True)
class Made:
    """What one action makes (any part may be absent)."""

    event: pb.HistoryEvent | None = None
    activity: pb.ActivityRequest | None = None
    timer: tuple[int, pb.HistoryEvent] | None = None  # (timer id, the TimerFired to deliver)
    child: ChildStart | None = None
    send: tuple[str, pb.HistoryEvent] | None = None  # (target instance, the event it receives)


def _event(a: pb.WorkflowAction, ctx: Context) -> pb.HistoryEvent:
    return pb.HistoryEvent(eventId=a.id, timestamp=ts(ctx.now_ns))


def _message(ctx: Context) -> pb.HistoryEvent:
    return pb.HistoryEvent(eventId=-1, timestamp=ts(ctx.now_ns))


def activity_request(*, iid: str, task_id: int, scheduled: pb.TaskScheduledEvent) -> pb.ActivityRequest:
    """The dispatch of a TaskScheduled (also when a rerun issues it again)."""
    req = pb.ActivityRequest(name=scheduled.name, taskId=task_id, taskExecutionId=scheduled.taskExecutionId)
    if scheduled.HasField("version"):
        req.version.CopyFrom(scheduled.version)
    if scheduled.HasField("input"):
        req.input.CopyFrom(scheduled.input)
    if scheduled.HasField("parentTraceContext"):
        req.parentTraceContext.CopyFrom(scheduled.parentTraceContext)
    req.workflowInstance.instanceId = iid
    return req


def timer_fired(*, timer_id: int, fire_at: Timestamp) -> pb.HistoryEvent:
    """The TimerFired a timer delivers when due (its timestamp is set when it is delivered)."""
    fired = pb.HistoryEvent(eventId=-1)
    fired.timerFired.timerId = timer_id
    fired.timerFired.fireAt.CopyFrom(fire_at)
    return fired


def execution_started(*, name: str, iid: str, now_ns: int, input: str | StringValue | None = None,
                      execution_id: str = "") -> pb.HistoryEvent:
    """The ExecutionStarted that begins an instance (or a generation of one)."""
    start = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
    es = start.executionStarted
    es.name = name
    if isinstance(input, str):
        es.input.value = input
    elif input is not None:
        es.input.CopyFrom(input)
    es.workflowInstance.instanceId = iid
    if execution_id:
        es.workflowInstance.executionId.value = execution_id
    return start


def child_start(*, child_id: str, name: str, input: StringValue | None, parent_task_id: int,
                ctx: Context) -> pb.HistoryEvent:
    """The ExecutionStarted of a child workflow, naming its parent."""
    start = execution_started(name=name, iid=child_id, now_ns=ctx.now_ns, input=input, execution_id=ctx.new_id())
    es = start.executionStarted
    es.parentInstance.taskScheduledId = parent_task_id
    es.parentInstance.name.value = ctx.name
    es.parentInstance.workflowInstance.instanceId = ctx.iid
    es.parentInstance.workflowInstance.executionId.value = ctx.execution_id
    if ctx.trace is not None:
        es.parentTraceContext.CopyFrom(ctx.trace)
    return start


def schedule_task(a: pb.WorkflowAction, ctx: Context) -> Made:
    st = a.scheduleTask
    ev = _event(a, ctx)
    rec = ev.taskScheduled
    rec.name = st.name
    if st.HasField("version"):
        rec.version.CopyFrom(st.version)
    if st.HasField("input"):
        rec.input.CopyFrom(st.input)
    rec.taskExecutionId = st.taskExecutionId
    if ctx.trace is not None:
        rec.parentTraceContext.CopyFrom(ctx.trace)
    if st.HasField("historyPropagationScope"):
        rec.historyPropagationScope = st.historyPropagationScope
    return Made(event=ev, activity=activity_request(iid=ctx.iid, task_id=a.id, scheduled=rec))


def create_timer(a: pb.WorkflowAction, ctx: Context) -> Made:
    ct = a.createTimer
    ev = _event(a, ctx)
    tc = ev.timerCreated
    tc.fireAt.CopyFrom(ct.fireAt)
    if ct.HasField("name"):
        tc.name = ct.name
    origin = ct.WhichOneof("origin")
    if origin is not None:
        getattr(tc, origin).CopyFrom(getattr(ct, origin))
    return Made(event=ev, timer=(a.id, timer_fired(timer_id=a.id, fire_at=ct.fireAt)))


def create_child(a: pb.WorkflowAction, ctx: Context) -> Made:
    cc = a.createChildWorkflow
    child_id = cc.instanceId or child_instance_id(ctx.iid, a.id)
    ev = _event(a, ctx)
    ce = ev.childWorkflowInstanceCreated
    ce.instanceId = child_id
    ce.name = cc.name
    if cc.HasField("version"):
        ce.version.CopyFrom(cc.version)
    if cc.HasField("input"):
        ce.input.CopyFrom(cc.input)
    if cc.HasField("historyPropagationScope"):
        ce.historyPropagationScope = cc.historyPropagationScope
    if cc.HasField("retryParentInstanceInfo"):  # a retry's link to its first attempt (applier.go:278)
        ce.retryParentInstanceInfo.CopyFrom(cc.retryParentInstanceInfo)
    if ctx.trace is not None:
        ce.parentTraceContext.CopyFrom(ctx.trace)
    start = child_start(child_id=child_id, name=cc.name, input=cc.input if cc.HasField("input") else None,
                        parent_task_id=a.id, ctx=ctx)
    return Made(event=ev, child=ChildStart(iid=child_id, start=start, parent_task_id=a.id))


def create_detached(a: pb.WorkflowAction, ctx: Context) -> Made:
    cd = a.createDetachedWorkflow
    ev = _event(a, ctx)
    ev.detachedWorkflowInstanceCreated.instanceId = cd.instanceId
    given = cd.executionId.value if cd.HasField("executionId") else ""
    start = execution_started(name=cd.name, iid=cd.instanceId, now_ns=ctx.now_ns,
                              input=cd.input if cd.HasField("input") else None, execution_id=given or ctx.new_id())
    es = start.executionStarted
    if cd.HasField("scheduledStartTimestamp"):
        es.scheduledStartTimestamp.CopyFrom(cd.scheduledStartTimestamp)
    for k, v in cd.tags.items():
        es.tags[k] = v
    return Made(event=ev, child=ChildStart(iid=cd.instanceId, start=start, parent_task_id=a.id, detached=True))


def send_event(a: pb.WorkflowAction, ctx: Context) -> Made:
    se = a.sendEvent
    ev = _event(a, ctx)
    ev.eventSent.instanceId = se.instance.instanceId
    ev.eventSent.name = se.name
    if se.HasField("data"):
        ev.eventSent.input.CopyFrom(se.data)
    # REF (R3.7): the target receives EventRaised, as classic DTFx does.
    raised = _message(ctx)
    raised.eventRaised.name = se.name
    if se.HasField("data"):
        raised.eventRaised.input.CopyFrom(se.data)
    return Made(event=ev, send=(se.instance.instanceId, raised))


def terminate_other(a: pb.WorkflowAction, ctx: Context) -> Made:
    tw = a.terminateWorkflow
    term = _message(ctx)
    if tw.HasField("reason"):
        term.executionTerminated.input.CopyFrom(tw.reason)
    term.executionTerminated.recurse = tw.recurse
    return Made(send=(tw.instanceId, term))


def complete(a: pb.WorkflowAction, ctx: Context) -> Made:
    """A final completion (continue-as-new is the turn's business, see turn.py)."""
    cw = a.completeWorkflow
    ev = _event(a, ctx)
    ev.executionCompleted.workflowStatus = cw.workflowStatus
    if cw.HasField("result"):
        ev.executionCompleted.result.CopyFrom(cw.result)
    if cw.HasField("failureDetails"):
        ev.executionCompleted.failureDetails.CopyFrom(cw.failureDetails)
    return Made(event=ev)


RULES: dict[str, Callable[[pb.WorkflowAction, Context], Made]] = {
    ActionKind.SCHEDULE_TASK.field: schedule_task,
    ActionKind.CREATE_TIMER.field: create_timer,
    ActionKind.CREATE_CHILD_WORKFLOW.field: create_child,
    ActionKind.CREATE_DETACHED_WORKFLOW.field: create_detached,
    ActionKind.SEND_EVENT.field: send_event,
    ActionKind.TERMINATE_WORKFLOW.field: terminate_other,
}


def child_result(done: pb.ExecutionCompletedEvent, *, task_id: int, now_ns: int) -> pb.HistoryEvent:
    """R3.6: what a parent receives when its child `done` ends (a failure keeps the child's details)."""
    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(now_ns))
    if done.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED:
        ev.childWorkflowInstanceCompleted.taskScheduledId = task_id
        if done.HasField("result"):
            ev.childWorkflowInstanceCompleted.result.CopyFrom(done.result)
    else:
        ev.childWorkflowInstanceFailed.taskScheduledId = task_id
        if done.HasField("failureDetails"):
            ev.childWorkflowInstanceFailed.failureDetails.CopyFrom(done.failureDetails)
    return ev
