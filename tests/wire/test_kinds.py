"""Event and action kind names."""

from __future__ import annotations

import pytest

from taskhub_wire import pb
from taskhub_wire.kinds import (
    ACTION_KINDS,
    EVENT_KINDS,
    action_field,
    action_kind,
    event_field,
    event_kind,
)


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (pb.HistoryEvent(workflowStarted=pb.WorkflowStartedEvent()), "WorkflowStarted"),
        (pb.HistoryEvent(executionStarted=pb.ExecutionStartedEvent(name="wf")), "ExecutionStarted"),
        (pb.HistoryEvent(eventId=3, taskScheduled=pb.TaskScheduledEvent(name="echo")), "TaskScheduled"),
        (pb.HistoryEvent(taskCompleted=pb.TaskCompletedEvent(taskScheduledId=3)), "TaskCompleted"),
        (pb.HistoryEvent(timerFired=pb.TimerFiredEvent(timerId=1)), "TimerFired"),
        (pb.HistoryEvent(eventRaised=pb.EventRaisedEvent(name="go")), "EventRaised"),
        (
            pb.HistoryEvent(childWorkflowInstanceCreated=pb.ChildWorkflowInstanceCreatedEvent()),
            "ChildWorkflowInstanceCreated",
        ),
        (pb.HistoryEvent(executionStalled=pb.ExecutionStalledEvent()), "ExecutionStalled"),
        (
            pb.HistoryEvent(detachedWorkflowInstanceCreated=pb.DetachedWorkflowInstanceCreatedEvent()),
            "DetachedWorkflowInstanceCreated",
        ),
    ],
)
def test_event_kind(event: pb.HistoryEvent, kind: str) -> None:
    assert event_kind(event) == kind
    assert event.WhichOneof("eventType") == event_field(kind)


@pytest.mark.parametrize(
    ("field", "kind"),
    [
        ("scheduleTask", "ScheduleTask"),
        ("createTimer", "CreateTimer"),
        ("createChildWorkflow", "CreateChildWorkflow"),
        ("sendEvent", "SendEvent"),
        ("completeWorkflow", "CompleteWorkflow"),
        ("terminateWorkflow", "TerminateWorkflow"),
        ("workflowVersionNotAvailable", "WorkflowVersionNotAvailable"),
        ("createDetachedWorkflow", "CreateDetachedWorkflow"),
    ],
)
def test_action_kind(field: str, kind: str) -> None:
    action = pb.WorkflowAction(id=1)
    getattr(action, field).SetInParent()
    assert action_kind(action) == kind
    assert action_field(kind) == field


def test_every_oneof_member_has_a_kind() -> None:
    assert len(EVENT_KINDS) == 20 and len(set(EVENT_KINDS)) == 20
    assert set(ACTION_KINDS) == {
        "ScheduleTask",
        "CreateTimer",
        "CreateChildWorkflow",
        "SendEvent",
        "CompleteWorkflow",
        "TerminateWorkflow",
        "WorkflowVersionNotAvailable",
        "CreateDetachedWorkflow",
    }


def test_router_alone_is_not_a_kind() -> None:
    # router sits outside the oneof: an event with only a router still has no kind.
    with pytest.raises(ValueError, match="HistoryEvent has no eventType set"):
        event_kind(pb.HistoryEvent(eventId=4, router=pb.TaskRouter(sourceAppID="a")))
    with pytest.raises(ValueError, match="WorkflowAction has no workflowActionType set"):
        action_kind(pb.WorkflowAction(id=1))


def test_wrong_message_and_unknown_kind() -> None:
    with pytest.raises(TypeError, match="expected taskhub.dapr.v1.HistoryEvent"):
        event_kind(pb.WorkflowAction())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown event kind 'OrchestratorStarted'; known: ExecutionStarted"):
        event_field("OrchestratorStarted")
