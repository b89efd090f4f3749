"""Event and action kind names."""

from __future__ import annotations

import pytest

from taskhub_wire import pb
from taskhub_wire.kinds import (
    ACTION_KINDS,
    EVENT_KINDS,
    ActionKind,
    EventKind,
    Operation,
    Source,
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


def test_the_table_has_a_row_for_every_oneof_member_and_no_other() -> None:
    events = [f.name for f in pb.HistoryEvent.DESCRIPTOR.oneofs_by_name["eventType"].fields]
    actions = [f.name for f in pb.WorkflowAction.DESCRIPTOR.oneofs_by_name["workflowActionType"].fields]
    assert [k.field for k in EventKind] == events
    assert [k.field for k in ActionKind] == actions
    assert all(EventKind.from_field(f).field == f for f in events)


def test_made_by_opens_and_resolves_agree() -> None:
    for kind in EventKind:
        assert (kind.made_by is not None) == (kind.source is Source.ACTION), kind
        if kind.made_by is not None:
            assert kind.made_by.makes is kind
        assert (kind.resolves is None) == (kind.ref_field is None), kind
        if kind.resolves is not None:
            assert kind.delivered and kind.ref_field in pb.HistoryEvent.DESCRIPTOR.fields_by_name[
                kind.field].message_type.fields_by_name
        if kind.opens is not None:
            assert kind.produced and kind.opens.opened_by is kind
    assert {op.opened_by for op in Operation} == {k for k in EventKind if k.opens is not None}
    # Settled once: a completion is made by the CompleteWorkflow action (eventId = its id).
    assert EventKind.EXECUTION_COMPLETED.made_by is ActionKind.COMPLETE_WORKFLOW
    assert ActionKind.TERMINATE_WORKFLOW.makes is None


def test_a_kind_compares_equal_to_its_pascal_name() -> None:
    assert EventKind.TASK_SCHEDULED == "TaskScheduled" and EventKind.parse("TimerFired") is EventKind.TIMER_FIRED
    assert ActionKind.of(pb.WorkflowAction(id=1, createTimer=pb.CreateTimerAction())) is ActionKind.CREATE_TIMER
    with pytest.raises(ValueError, match="unknown action kind 'Nap'; known: ScheduleTask"):
        ActionKind.parse("Nap")
