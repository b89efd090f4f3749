"""Kind names of history events and workflow actions, as scenarios and reports spell them.

A kind is the upstream PascalCase name of the oneof member that is set: ``workflowStarted`` ->
``"WorkflowStarted"``, ``scheduleTask`` -> ``"ScheduleTask"``. Deriving it from the oneof keeps
it in step with the schema instead of a hand-kept list.
"""

from __future__ import annotations

from google.protobuf.message import Message

from taskhub_wire.dapr import taskhub_pb2 as pb

EVENT_ONEOF = "eventType"
ACTION_ONEOF = "workflowActionType"


def _pascal(field_name: str) -> str:
    return field_name[:1].upper() + field_name[1:]


def _oneof_kinds(message: type[Message], oneof: str) -> tuple[str, ...]:
    return tuple(_pascal(f.name) for f in message.DESCRIPTOR.oneofs_by_name[oneof].fields)


# Every kind the Dapr dialect can carry, in field-number order of declaration.
EVENT_KINDS: tuple[str, ...] = _oneof_kinds(pb.HistoryEvent, EVENT_ONEOF)
ACTION_KINDS: tuple[str, ...] = _oneof_kinds(pb.WorkflowAction, ACTION_ONEOF)


def _kind(message: Message, oneof: str, expected: type[Message]) -> str:
    if not isinstance(message, expected):
        raise TypeError(f"expected {expected.DESCRIPTOR.full_name}, got {type(message).__name__}")
    member = message.WhichOneof(oneof)
    if member is None:
        raise ValueError(f"{expected.DESCRIPTOR.name} has no {oneof} set, so it has no kind: {message!r}")
    return _pascal(member)


def event_kind(event: pb.HistoryEvent) -> str:
    """``"TaskScheduled"`` for an event whose ``taskScheduled`` is set, and so on."""
    return _kind(event, EVENT_ONEOF, pb.HistoryEvent)


def action_kind(action: pb.WorkflowAction) -> str:
    """``"CreateTimer"`` for an action whose ``createTimer`` is set, and so on."""
    return _kind(action, ACTION_ONEOF, pb.WorkflowAction)


def event_field(kind: str) -> str:
    """The HistoryEvent oneof member for a kind name (the inverse of :func:`event_kind`)."""
    return _field(kind, EVENT_KINDS, "event")


def action_field(kind: str) -> str:
    """The WorkflowAction oneof member for a kind name (the inverse of :func:`action_kind`)."""
    return _field(kind, ACTION_KINDS, "action")


def _field(kind: str, known: tuple[str, ...], what: str) -> str:
    if kind not in known:
        raise ValueError(f"unknown {what} kind {kind!r}; known: {', '.join(known)}")
    return kind[:1].lower() + kind[1:]
