"""Small builders for hand-made histories (HistoryEvents) and expected actions (WorkflowActions).

Times are seconds after T0 (2025-01-01T00:00:00Z) unless a datetime is given. Payloads are
passed as Python values and encoded the way the Dapr Python SDK encodes them (json.dumps);
leave a payload out (NONE) to leave the field unset.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from taskhub_wire import pb

T0 = datetime(2025, 1, 1)
NONE: Any = object()  # "no payload": the field stays unset
GUID_NAMESPACE = uuid.UUID("9e952958-5e33-4daf-827f-2fa12937b875")
OPTIONAL_FIRE_AT = Timestamp(seconds=253402300799, nanos=999999999)  # 9999-12-31T23:59:59.999999999Z

COMPLETED = pb.ORCHESTRATION_STATUS_COMPLETED
FAILED = pb.ORCHESTRATION_STATUS_FAILED
TERMINATED = pb.ORCHESTRATION_STATUS_TERMINATED
CONTINUED_AS_NEW = pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW


def at(t: float | datetime) -> datetime:
    return t if isinstance(t, datetime) else T0 + timedelta(seconds=t)


def stamp(t: float | datetime | Timestamp) -> Timestamp:
    if isinstance(t, Timestamp):
        return t
    out = Timestamp()
    out.FromDatetime(at(t))
    return out


def enc(value: Any) -> str:
    return json.dumps(value)


def execution_id(instance_id: str, turn_time: float | datetime, counter: int) -> str:
    """The task execution id dapr-ext-workflow derives: UUIDv5 of '<iid>_<turn time iso>_<counter>'."""
    return str(uuid.uuid5(GUID_NAMESPACE, f"{instance_id}_{at(turn_time).isoformat()}_{counter}"))


def _ev(event_id: int = -1, t: float | datetime | None = None) -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=event_id)
    if t is not None:
        ev.timestamp.CopyFrom(stamp(t))
    return ev


# ---------------------------------------------------------------------------- history events


def workflow_started(t: float | datetime = 0, *, version: str | None = None,
                     patches: Sequence[str] = ()) -> pb.HistoryEvent:
    """A turn's WorkflowStarted; `version` pins a named version, `patches` are recorded patches."""
    ev = _ev(-1, t)
    ev.workflowStarted.SetInParent()
    if version is not None or patches:
        v = ev.workflowStarted.version
        v.SetInParent()
        v.patches.extend(patches)
        if version is not None:
            v.name = version
    return ev


def execution_started(name: str, input: Any = NONE, *, instance_id: str = "wf-1",
                      t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    es = ev.executionStarted
    es.name = name
    es.workflowInstance.instanceId = instance_id
    if input is not NONE:
        es.input.value = enc(input)
    return ev


def start(name: str, input: Any = NONE, *, t: float | datetime = 0, version: str | None = None,
          patches: Sequence[str] = (), instance_id: str = "wf-1") -> list[pb.HistoryEvent]:
    """The first turn's events: WorkflowStarted (optionally with a pinned version) + ExecutionStarted."""
    return [workflow_started(t, version=version, patches=patches),
            execution_started(name, input, instance_id=instance_id, t=t)]


def task_scheduled(id: int, name: str, input: Any = NONE, *, execution_id: str = "",
                   t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(id, t)
    ev.taskScheduled.name = name
    ev.taskScheduled.taskExecutionId = execution_id
    if input is not NONE:
        ev.taskScheduled.input.value = enc(input)
    return ev


def task_completed(id: int, result: Any = NONE, *, t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.taskCompleted.taskScheduledId = id
    if result is not NONE:
        ev.taskCompleted.result.value = enc(result)
    return ev


def task_failed(id: int, message: str = "boom", *, error_type: str = "ActivityFailure",
                non_retriable: bool = False, t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    tf = ev.taskFailed
    tf.taskScheduledId = id
    tf.failureDetails.errorType = error_type
    tf.failureDetails.errorMessage = message
    if non_retriable:
        tf.failureDetails.isNonRetriable = True
    return ev


def timer_created(id: int, fire_at: float | datetime | Timestamp, *, origin: str = "createTimer",
                  origin_value: str = "", t: float | datetime = 0) -> pb.HistoryEvent:
    """origin: createTimer | externalEvent (origin_value = event name) | activityRetry (task execution id)
    | childWorkflowRetry (child instance id) | none (no origin set)."""
    ev = _ev(id, t)
    tc = ev.timerCreated
    tc.fireAt.CopyFrom(stamp(fire_at))
    _set_origin(tc, origin, origin_value)
    return ev


def optional_timer_created(id: int, event_name: str, *, t: float | datetime = 0) -> pb.HistoryEvent:
    """The far-future timer an indefinite wait_event reserves (never fires)."""
    return timer_created(id, OPTIONAL_FIRE_AT, origin="externalEvent", origin_value=event_name, t=t)


def timer_fired(id: int, fire_at: float | datetime | Timestamp, *,
                t: float | datetime | None = None) -> pb.HistoryEvent:
    ev = _ev(-1, fire_at if t is None else t)
    ev.timerFired.timerId = id
    ev.timerFired.fireAt.CopyFrom(stamp(fire_at))
    return ev


def event_raised(name: str, value: Any = NONE, *, t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.eventRaised.name = name
    if value is not NONE:
        ev.eventRaised.input.value = enc(value)
    return ev


def detached_created(id: int, instance_id: str, *, t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(id, t)
    ev.detachedWorkflowInstanceCreated.instanceId = instance_id
    return ev


def child_created(id: int, name: str, instance_id: str, input: Any = NONE, *,
                  t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(id, t)
    cc = ev.childWorkflowInstanceCreated
    cc.name = name
    cc.instanceId = instance_id
    if input is not NONE:
        cc.input.value = enc(input)
    return ev


def child_completed(id: int, result: Any = NONE, *, t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.childWorkflowInstanceCompleted.taskScheduledId = id
    if result is not NONE:
        ev.childWorkflowInstanceCompleted.result.value = enc(result)
    return ev


def child_failed(id: int, message: str = "child boom", *, error_type: str = "ProgramFailure",
                 t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    cf = ev.childWorkflowInstanceFailed
    cf.taskScheduledId = id
    cf.failureDetails.errorType = error_type
    cf.failureDetails.errorMessage = message
    return ev


def suspended(t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.executionSuspended.SetInParent()
    return ev


def resumed(t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.executionResumed.SetInParent()
    return ev


def terminated(output: Any = NONE, *, t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.executionTerminated.SetInParent()
    if output is not NONE:
        ev.executionTerminated.input.value = enc(output)
    return ev


def execution_stalled(reason: int = pb.PATCH_MISMATCH, description: str = "stalled", *,
                      t: float | datetime = 0) -> pb.HistoryEvent:
    ev = _ev(-1, t)
    ev.executionStalled.reason = reason
    ev.executionStalled.description = description
    return ev


def _set_origin(msg: Any, origin: str, value: str) -> None:
    if origin == "createTimer":
        msg.createTimer.SetInParent()
    elif origin == "externalEvent":
        msg.externalEvent.name = value
    elif origin == "activityRetry":
        msg.activityRetry.taskExecutionId = value
    elif origin == "childWorkflowRetry":
        msg.childWorkflowRetry.instanceId = value
    elif origin != "none":
        raise ValueError(origin)


# ---------------------------------------------------------------------------- expected actions


def schedule(id: int, name: str, input: Any = NONE, *, execution_id: str) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    a.scheduleTask.name = name
    a.scheduleTask.taskExecutionId = execution_id
    if input is not NONE:
        a.scheduleTask.input.value = enc(input)
    return a


def create_timer(id: int, fire_at: float | datetime | Timestamp, *, origin: str = "createTimer",
                 origin_value: str = "") -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    a.createTimer.fireAt.CopyFrom(stamp(fire_at))
    _set_origin(a.createTimer, origin, origin_value)
    return a


def optional_timer(id: int, event_name: str) -> pb.WorkflowAction:
    return create_timer(id, OPTIONAL_FIRE_AT, origin="externalEvent", origin_value=event_name)


def create_child(id: int, name: str, instance_id: str, input: Any = NONE) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    a.createChildWorkflow.name = name
    a.createChildWorkflow.instanceId = instance_id
    if input is not NONE:
        a.createChildWorkflow.input.value = enc(input)
    return a


def create_detached(id: int, name: str, instance_id: str, input: Any = NONE) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    a.createDetachedWorkflow.name = name
    a.createDetachedWorkflow.instanceId = instance_id
    if input is not NONE:
        a.createDetachedWorkflow.input.value = enc(input)
    return a


def complete(id: int, result: Any = NONE, *, status: int = COMPLETED, encoded: str | None = None,
             carryover: Iterable[pb.HistoryEvent] = ()) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    cw = a.completeWorkflow
    cw.workflowStatus = status
    if encoded is not None:
        cw.result.value = encoded
    elif result is not NONE:
        cw.result.value = enc(result)
    cw.carryoverEvents.extend(carryover)
    return a


def failed(id: int, error_type: str, message: str) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    cw = a.completeWorkflow
    cw.workflowStatus = FAILED
    cw.failureDetails.errorType = error_type
    cw.failureDetails.errorMessage = message
    return a


def carried_event(name: str, value: Any = NONE) -> pb.HistoryEvent:
    """A carryover EventRaised as the Dapr Python SDK builds it (eventId -1, zero timestamp)."""
    ev = pb.HistoryEvent(eventId=-1)
    ev.timestamp.SetInParent()
    ev.eventRaised.name = name
    if value is not NONE:
        ev.eventRaised.input.value = enc(value)
    return ev


def version_not_available(id: int = 1) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=id)
    a.workflowVersionNotAvailable.SetInParent()
    return a


def kinds(actions: Iterable[pb.WorkflowAction]) -> list[tuple[str, int]]:
    """A compact view for assertion messages: [(action kind, id), ...]."""
    return [(a.WhichOneof("workflowActionType"), a.id) for a in actions]
