"""Events and actions as scenario data: `{TaskScheduled: {name: echo}, eventId: 1}` <-> protobuf.

Bodies use the proto JSON form of our schema (camelCase field names; wrapper
values as plain strings), so a scenario can state any field the wire carries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_wire.kinds import action_kind, event_field, event_kind

from conformance.errors import InputError

BASE_SECONDS = 1_767_225_600  # 2026-01-01T00:00:00Z: default timestamps of hand-written events


_INT32 = (-(1 << 31), (1 << 31) - 1)


class WireError(InputError):
    pass


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_event(raw: Any, *, index: int = 0) -> pb.HistoryEvent:
    """`{Kind: body, eventId: n, timestamp: RFC3339}`; defaults: eventId -1, a timestamp one second per index."""
    if isinstance(raw, str):
        raw = {raw: {}}
    if not isinstance(raw, Mapping):
        raise WireError("an event is {Kind: {fields}, eventId: n, timestamp: ...}, e.g. {TaskScheduled: {name: echo}}")
    kinds = [k for k in raw if k not in ("eventId", "timestamp")]
    if len(kinds) != 1:
        raise WireError(f"an event names exactly one kind (e.g. TaskScheduled); got {sorted(map(str, raw))}")
    kind = kinds[0]
    try:
        field = event_field(kind)
    except (KeyError, ValueError) as exc:
        raise WireError(str(exc).strip("'\"")) from None
    event_id = raw.get("eventId", -1)
    if not isinstance(event_id, int) or isinstance(event_id, bool) or not _INT32[0] <= event_id <= _INT32[1]:
        raise WireError(f"eventId {_short(event_id)} must be a whole number from {_INT32[0]} to {_INT32[1]}")
    ev = pb.HistoryEvent(eventId=event_id)
    if "timestamp" in raw:
        try:
            ev.timestamp.FromJsonString(str(raw["timestamp"]))
        except ValueError as exc:
            raise WireError(f"timestamp {_short(raw['timestamp'])}: {exc}") from None
    else:
        ev.timestamp.seconds = BASE_SECONDS + index
    body = raw[kind] or {}
    if not isinstance(body, Mapping):
        raise WireError(f"{kind}: the body is a mapping of its fields, e.g. {{{kind}: {{...}}}}, not {_short(body)}")
    try:
        json_format.ParseDict(body, getattr(ev, field))
    except (json_format.ParseError, TypeError, ValueError, OverflowError) as exc:
        # ParseDict reports most problems as ParseError; an out-of-range integer can surface raw.
        raise WireError(f"{kind}: {exc}") from None
    getattr(ev, field).SetInParent()
    return ev


_PAYLOADS = ("input", "result", "data")


def _decoded(body: dict[str, Any]) -> dict[str, Any]:
    """Payload fields hold JSON text; compare their values, so patterns can say `result: ok`."""
    for key in _PAYLOADS:
        if isinstance(body.get(key), str):
            try:
                body[key] = json.loads(body[key])
            except ValueError:
                pass
    return body


# Proto JSON leaves out zero values; these ids are meaningful at 0 (the Go SDK numbers actions from 0).
_ZERO_IDS = ("taskScheduledId", "timerId")


def _with_zero_ids(msg: Any, body: dict[str, Any]) -> dict[str, Any]:
    for name in _ZERO_IDS:
        if name in msg.DESCRIPTOR.fields_by_name and name not in body:
            body[name] = 0
    if "parentInstance" in body and "taskScheduledId" not in body["parentInstance"]:
        body["parentInstance"]["taskScheduledId"] = 0
    return body


_ZERO_OK = {"eventId", "taskScheduledId", "timerId", "id"}


def message_dict(msg: Any) -> dict[str, Any]:
    """Proto JSON of any message, keeping the ids that are meaningful at 0 (eventId, action id, ...)."""
    out = json_format.MessageToDict(msg)
    _fill_zero_ids(msg, out)
    return out


def _fill_zero_ids(msg: Any, out: dict[str, Any]) -> None:
    for field in msg.DESCRIPTOR.fields:
        key = field.json_name
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            if field.is_repeated:
                for sub, sub_out in zip(getattr(msg, field.name), out.get(key, [])):
                    _fill_zero_ids(sub, sub_out)
            elif msg.HasField(field.name) and key in out:
                _fill_zero_ids(getattr(msg, field.name), out[key])
        elif field.name in _ZERO_OK and key not in out and not field.is_repeated \
                and field.type in (field.TYPE_INT32, field.TYPE_INT64, field.TYPE_UINT32):
            out[key] = 0


def event_dict(ev: pb.HistoryEvent, *, with_router: bool = False) -> dict[str, Any]:
    """A compact form for matching: {kind, eventId, timestamp, ...fields of the event body}; with
    `with_router` (scenarios of several apps) also `router` where the event has one (engine-rules R2.13:
    other checks ignore routers)."""
    kind = event_kind(ev)
    inner = getattr(ev, kind.field)
    body = _with_zero_ids(inner, _decoded(json_format.MessageToDict(inner)))
    out: dict[str, Any] = {"kind": kind.value, "eventId": ev.eventId}  # plain text: the dict is data (JSON, YAML)
    if ev.HasField("timestamp"):
        out["timestamp"] = ev.timestamp.ToJsonString()
    out.update(body)
    if with_router and ev.HasField("router"):
        out["router"] = json_format.MessageToDict(ev.router)
    return out


def action_dict(action: pb.WorkflowAction) -> dict[str, Any]:
    """{Kind: {id, ...fields}} for an action; the form scenario vectors state expected actions in."""
    kind = action_kind(action)
    body = _decoded(json_format.MessageToDict(getattr(action, kind.field)))
    return {kind.value: {"id": action.id, **body}}
