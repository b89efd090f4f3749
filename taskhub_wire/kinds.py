"""The one table of history-event and action kinds: both spellings and what each kind means.

A kind has two spellings: the protobuf oneof member (``taskScheduled``, camelCase: the wire) and
its PascalCase name (``TaskScheduled``: scenarios, reports and the harness's JSON dicts). Each
`EventKind` / `ActionKind` member's value is the PascalCase name, so it compares equal to the text
a scenario or a report holds; `.field` is the oneof member. Every other module names a kind through
these enums (``tests/test_kind_table.py`` fails on a second table of kind literals).

Each event kind row states where the event comes from (`Source`), which action makes it, and which
operation it opens or resolves (and the body field that names the operation's id). One settled
question: ExecutionCompleted is made by an action (CompleteWorkflow; its eventId is the action's
id), although the engine also writes one itself when it enforces a termination (eventId -1, R3.16).
`tests/wire/test_kinds.py` checks the table against the schema's oneofs.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message

from taskhub_wire.dapr import taskhub_pb2 as pb

EVENT_ONEOF = "eventType"
ACTION_ONEOF = "workflowActionType"


def _camel(pascal: str) -> str:
    return pascal[:1].lower() + pascal[1:]


class Operation(enum.StrEnum):
    """The operations a turn opens and a later event resolves; one id sequence for all (R3.14)."""

    TASK = "task"
    TIMER = "timer"
    CHILD = "child"

    @property
    def opened_by(self) -> EventKind:
        return _OPENER[self]


class Source(enum.StrEnum):
    """Where an event of a kind comes from."""

    TURN = "turn"  # the engine opens every turn with it (WorkflowStarted)
    ACTION = "action"  # made from an action of the worker's answer; eventId = the action's id
    INBOX = "inbox"  # delivered into a turn from outside it: a start, a result, a message, a command
    ENGINE = "engine"  # written by the engine outside any turn (ExecutionStalled)
    NEVER = "never"  # in the schema, never recorded by the Dapr engines (R2.2)


class ActionKind(enum.StrEnum):
    """A worker's action, by its PascalCase name; `.field` is the WorkflowAction oneof member."""

    field: str

    def __new__(cls, name: str) -> ActionKind:
        member = str.__new__(cls, name)
        member._value_ = name
        member.field = _camel(name)  # an attribute, not a property: read on hot paths
        return member

    SCHEDULE_TASK = "ScheduleTask"
    CREATE_CHILD_WORKFLOW = "CreateChildWorkflow"
    CREATE_TIMER = "CreateTimer"
    SEND_EVENT = "SendEvent"
    COMPLETE_WORKFLOW = "CompleteWorkflow"
    TERMINATE_WORKFLOW = "TerminateWorkflow"
    WORKFLOW_VERSION_NOT_AVAILABLE = "WorkflowVersionNotAvailable"
    CREATE_DETACHED_WORKFLOW = "CreateDetachedWorkflow"

    @property
    def makes(self) -> EventKind | None:
        """The event the engine records in this instance's history for the action (None: it
        records none here; TerminateWorkflow reaches another instance, WorkflowVersionNotAvailable
        stalls this one)."""
        return _MAKES.get(self)

    @property
    def opens(self) -> Operation | None:
        """The operation the action opens (its event's), or None."""
        made = self.makes
        return made.opens if made is not None else None

    @classmethod
    def of(cls, action: pb.WorkflowAction) -> ActionKind:
        """The kind of a WorkflowAction (ValueError when none is set)."""
        return _of(action, ACTION_ONEOF, pb.WorkflowAction, _ACTION_BY_FIELD)  # type: ignore[return-value]

    @classmethod
    def from_field(cls, name: str) -> ActionKind:
        try:
            return _ACTION_BY_FIELD[name]
        except KeyError:
            raise ValueError(f"unknown action field {name!r}; known: {', '.join(_ACTION_BY_FIELD)}") from None

    @classmethod
    def parse(cls, name: str) -> ActionKind:
        """A PascalCase name as a scenario spells it, with the known names in the error."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown action kind {name!r}; known: {', '.join(cls)}") from None


class EventKind(enum.StrEnum):
    """A history event, by its PascalCase name, with the facts of its row (see the module doc)."""

    field: str
    source: Source
    made_by: ActionKind | None
    opens: Operation | None
    resolves: Operation | None
    ref_field: str | None  # the body field naming the operation it resolves

    def __new__(cls, name: str, source: Source, facts: dict[str, Any] | None = None) -> EventKind:
        # A row is (name, source) or (name, source, {made_by, opens, resolves, ref_field}).
        member = str.__new__(cls, name)
        member._value_ = name
        member.field = _camel(name)
        member.source = source
        facts = facts or {}
        member.made_by, member.opens = facts.get("made_by"), facts.get("opens")
        member.resolves, member.ref_field = facts.get("resolves"), facts.get("ref_field")
        return member

    EXECUTION_STARTED = "ExecutionStarted", Source.INBOX
    EXECUTION_COMPLETED = "ExecutionCompleted", Source.ACTION, dict(made_by=ActionKind.COMPLETE_WORKFLOW)
    EXECUTION_TERMINATED = "ExecutionTerminated", Source.INBOX
    TASK_SCHEDULED = "TaskScheduled", Source.ACTION, dict(made_by=ActionKind.SCHEDULE_TASK, opens=Operation.TASK)
    TASK_COMPLETED = "TaskCompleted", Source.INBOX, dict(resolves=Operation.TASK, ref_field="taskScheduledId")
    TASK_FAILED = "TaskFailed", Source.INBOX, dict(resolves=Operation.TASK, ref_field="taskScheduledId")
    CHILD_WORKFLOW_INSTANCE_CREATED = ("ChildWorkflowInstanceCreated", Source.ACTION,
                                       dict(made_by=ActionKind.CREATE_CHILD_WORKFLOW, opens=Operation.CHILD))
    CHILD_WORKFLOW_INSTANCE_COMPLETED = ("ChildWorkflowInstanceCompleted", Source.INBOX,
                                         dict(resolves=Operation.CHILD, ref_field="taskScheduledId"))
    CHILD_WORKFLOW_INSTANCE_FAILED = ("ChildWorkflowInstanceFailed", Source.INBOX,
                                      dict(resolves=Operation.CHILD, ref_field="taskScheduledId"))
    TIMER_CREATED = "TimerCreated", Source.ACTION, dict(made_by=ActionKind.CREATE_TIMER, opens=Operation.TIMER)
    TIMER_FIRED = "TimerFired", Source.INBOX, dict(resolves=Operation.TIMER, ref_field="timerId")
    WORKFLOW_STARTED = "WorkflowStarted", Source.TURN
    WORKFLOW_COMPLETED = "WorkflowCompleted", Source.NEVER
    EVENT_SENT = "EventSent", Source.ACTION, dict(made_by=ActionKind.SEND_EVENT)
    EVENT_RAISED = "EventRaised", Source.INBOX
    CONTINUE_AS_NEW = "ContinueAsNew", Source.NEVER
    EXECUTION_SUSPENDED = "ExecutionSuspended", Source.INBOX
    EXECUTION_RESUMED = "ExecutionResumed", Source.INBOX
    EXECUTION_STALLED = "ExecutionStalled", Source.ENGINE
    DETACHED_WORKFLOW_INSTANCE_CREATED = ("DetachedWorkflowInstanceCreated", Source.ACTION,
                                          dict(made_by=ActionKind.CREATE_DETACHED_WORKFLOW))

    @property
    def produced(self) -> bool:
        """Made from the turn's own actions (never delivered to a worker as new)."""
        return self.source is Source.ACTION

    @property
    def delivered(self) -> bool:
        """Delivered into a turn from the instance's inbox."""
        return self.source is Source.INBOX

    @classmethod
    def of(cls, event: pb.HistoryEvent) -> EventKind:
        """The kind of a HistoryEvent (ValueError when none is set)."""
        return _of(event, EVENT_ONEOF, pb.HistoryEvent, _EVENT_BY_FIELD)  # type: ignore[return-value]

    @classmethod
    def from_field(cls, name: str) -> EventKind:
        try:
            return _EVENT_BY_FIELD[name]
        except KeyError:
            raise ValueError(f"unknown event field {name!r}; known: {', '.join(_EVENT_BY_FIELD)}") from None

    @classmethod
    def parse(cls, name: str) -> EventKind:
        """A PascalCase name as a scenario spells it, with the known names in the error."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown event kind {name!r}; known: {', '.join(cls)}") from None


_EVENT_BY_FIELD = MappingProxyType({k.field: k for k in EventKind})
_ACTION_BY_FIELD = MappingProxyType({k.field: k for k in ActionKind})
_MAKES = MappingProxyType({k.made_by: k for k in EventKind if k.made_by is not None})
_OPENER = MappingProxyType({k.opens: k for k in EventKind if k.opens is not None})

# Every kind by its PascalCase name, in the enum's order (the schema's field-number order).
EVENT_KINDS: tuple[str, ...] = tuple(k.value for k in EventKind)
ACTION_KINDS: tuple[str, ...] = tuple(k.value for k in ActionKind)
# Kinds by what they are, for membership tests on a oneof member (`ev.WhichOneof(...) in ...`).
PRODUCED_FIELDS = frozenset(k.field for k in EventKind if k.produced)
OPENING_FIELDS = frozenset(k.field for k in EventKind if k.opens is not None)
OPENING_ACTION_FIELDS = frozenset(k.field for k in ActionKind if k.opens is not None)
SUSPENSION_FIELDS = frozenset({EventKind.EXECUTION_SUSPENDED.field, EventKind.EXECUTION_RESUMED.field})
RESOLVING_FIELDS = frozenset(k.field for k in EventKind if k.resolves is not None)
# Upstream durabletask protos before the orchestrator -> workflow rename spell these members the
# old way (same field numbers), so recorded files in that spelling still load.
OLD_EVENT_FIELDS = MappingProxyType({
    "orchestratorStarted": EventKind.WORKFLOW_STARTED,
    "orchestratorCompleted": EventKind.WORKFLOW_COMPLETED,
    "subOrchestrationInstanceCreated": EventKind.CHILD_WORKFLOW_INSTANCE_CREATED,
    "subOrchestrationInstanceCompleted": EventKind.CHILD_WORKFLOW_INSTANCE_COMPLETED,
    "subOrchestrationInstanceFailed": EventKind.CHILD_WORKFLOW_INSTANCE_FAILED,
})


def _of(message: Message, oneof: str, expected: type[Message], by_field: MappingProxyType) -> enum.StrEnum:
    if not isinstance(message, expected):
        raise TypeError(f"expected {expected.DESCRIPTOR.full_name}, got {type(message).__name__}")
    member = message.WhichOneof(oneof)
    if member is None:
        raise ValueError(f"{expected.DESCRIPTOR.name} has no {oneof} set, so it has no kind: {message!r}")
    return by_field[member]


def pascal(field: str) -> str:
    """The PascalCase name of an event or action field ("" stays ""; an unknown name is returned as
    it is, so a message can still quote it)."""
    kind = _EVENT_BY_FIELD.get(field) or _ACTION_BY_FIELD.get(field)
    return kind.value if kind is not None else field


def event_kind(event: pb.HistoryEvent) -> EventKind:
    """``EventKind.TASK_SCHEDULED`` (== "TaskScheduled") for an event whose ``taskScheduled`` is set."""
    return EventKind.of(event)


def action_kind(action: pb.WorkflowAction) -> ActionKind:
    """``ActionKind.CREATE_TIMER`` (== "CreateTimer") for an action whose ``createTimer`` is set."""
    return ActionKind.of(action)


def event_field(kind: str) -> str:
    """The HistoryEvent oneof member for a kind name (the inverse of :func:`event_kind`)."""
    return EventKind.parse(kind).field


def action_field(kind: str) -> str:
    """The WorkflowAction oneof member for a kind name (the inverse of :func:`action_kind`)."""
    return ActionKind.parse(kind).field
