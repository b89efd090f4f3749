"""One-line summaries and size-bounded dicts of protocol messages, for transcripts."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from taskhub_wire import pb
from taskhub_wire.kinds import ActionKind, EventKind, action_kind, event_kind

MAX_STRING = 1000  # characters kept of one string value in a transcript message
MAX_ITEMS = 50  # elements kept of one list
MAX_DEPTH = 24
SHORT = 40  # characters of a payload shown in a summary
TOKEN = 8  # characters of a completion token shown in a summary


def to_dict(message: Message) -> dict[str, Any]:
    """``MessageToDict(..., preserving_proto_field_name=True)``, with huge strings and lists cut."""
    try:
        raw = json_format.MessageToDict(message, preserving_proto_field_name=True)
    except Exception as exc:  # noqa: BLE001 - e.g. invalid UTF-8 in a string field; never break forwarding
        return {"_unrenderable": f"{type(exc).__name__}: {exc}"}
    return truncate(raw)


def truncate(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        return "…(nested too deep)"
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            return f"{value[:MAX_STRING]}…(+{len(value) - MAX_STRING} chars)"
        return value
    if isinstance(value, dict):
        return {k: truncate(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        kept = [truncate(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept.append(f"…(+{len(value) - MAX_ITEMS} items)")
        return kept
    return value


def short(text: str, limit: int = SHORT) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(text: str) -> str:
    """A payload as it is on the wire (payloads are JSON text, so a string shows its own quotes)."""
    return short(text)


def token(tok: str) -> str:
    return f"token={tok[:TOKEN]}.." if tok else "token=<none>"


def _failure(fd: pb.TaskFailureDetails) -> str:
    return f"failure={fd.errorType or '?'}: {quoted(fd.errorMessage)}"


def _event(ev: pb.HistoryEvent) -> str:
    try:
        kind = event_kind(ev)
    except ValueError:
        return "?"
    body = getattr(ev, kind.field)
    if hasattr(body, "taskScheduledId"):
        return f"{kind}#{body.taskScheduledId}"
    if kind is EventKind.TIMER_FIRED:
        return f"{kind}#{ev.timerFired.timerId}"
    if kind is EventKind.EVENT_RAISED:
        return f"{kind} {ev.eventRaised.name}"
    if kind.opens is not None:
        return f"{kind}#{ev.eventId}"
    return kind


def _events(events: Any, limit: int = 8) -> str:
    names = [_event(e) for e in events]
    if len(names) > limit:
        names = names[:limit] + [f"+{len(names) - limit}"]
    return "[" + ", ".join(names) + "]"


def _action(a: pb.WorkflowAction) -> str:
    try:
        kind = action_kind(a)
    except ValueError:
        return f"?#{a.id}"
    head = f"{kind}#{a.id}"
    if kind is ActionKind.SCHEDULE_TASK:
        return f"{head} {a.scheduleTask.name}"
    if kind is ActionKind.CREATE_CHILD_WORKFLOW:
        return f"{head} {a.createChildWorkflow.name}"
    if kind is ActionKind.SEND_EVENT:
        return f"{head} {a.sendEvent.name}"
    if kind is ActionKind.COMPLETE_WORKFLOW:
        cw = a.completeWorkflow
        status = pb.OrchestrationStatus.Name(cw.workflowStatus).removeprefix("ORCHESTRATION_STATUS_") \
            if cw.workflowStatus in pb.OrchestrationStatus.values() else str(cw.workflowStatus)
        if cw.HasField("failureDetails"):
            return f"{head} {status} {_failure(cw.failureDetails)}"
        return f"{head} {status}" + (f" result={quoted(cw.result.value)}" if cw.HasField("result") else "")
    return head


def summarize(rpc: str, direction: str, message: Message | None, size: int) -> str:
    """``WorkItem activityRequest echo#2 i-1 token=ab12cd34..``, ``CompleteActivityTask i-1#2 result="x" ...``."""
    if message is None:
        return f"{rpc} {direction}: <undecodable {size} bytes, forwarded untouched>"
    if isinstance(message, pb.WorkItem):
        which = message.WhichOneof("request")
        if which == "activityRequest":
            ar = message.activityRequest
            inp = f" input={quoted(ar.input.value)}" if ar.HasField("input") else ""
            return (f"WorkItem activityRequest {ar.name}#{ar.taskId} {ar.workflowInstance.instanceId}{inp} "
                    f"{token(message.completionToken)}")
        if which == "workflowRequest":
            wr = message.workflowRequest
            return (f"WorkItem workflowRequest {wr.instanceId} past={len(wr.pastEvents)} "
                    f"new={_events(wr.newEvents)} {token(message.completionToken)}")
        return f"WorkItem <empty> {token(message.completionToken)}"
    if isinstance(message, pb.ActivityResponse):
        if message.HasField("failureDetails"):
            outcome = _failure(message.failureDetails)
        elif message.HasField("result"):
            outcome = f"result={quoted(message.result.value)}"
        else:
            outcome = "result=<none>"
        return f"{rpc} {message.instanceId}#{message.taskId} {outcome} {token(message.completionToken)}"
    if isinstance(message, pb.WorkflowResponse):
        acts = ", ".join(_action(a) for a in message.actions[:8])
        if len(message.actions) > 8:
            acts += f", +{len(message.actions) - 8}"
        extra = f" status={quoted(message.customStatus.value)}" if message.HasField("customStatus") else ""
        return f"{rpc} {message.instanceId} [{acts}]{extra} {token(message.completionToken)}"
    if direction == "response":
        return f"{rpc} → OK {_generic(message)}"
    return f"{rpc} {_generic(message)}"


def _generic(message: Message) -> str:
    """The message name and its short top-level scalar fields."""
    try:
        d = json_format.MessageToDict(message, preserving_proto_field_name=True)
    except Exception:  # noqa: BLE001
        d = {}
    parts = [type(message).DESCRIPTOR.name]
    for k, v in d.items():
        if isinstance(v, (dict, list)):
            if isinstance(v, list):
                parts.append(f"{k}=[{len(v)}]")
            continue
        parts.append(f"{k}={quoted(v) if isinstance(v, str) else v}")
    return short(" ".join(parts), 160)


__all__ = ["summarize", "to_dict", "truncate"]
