"""Remove from a Recording only what the contract leaves free, keep every relation.

Free: the instance ids the harness made (and the app id daprd adds), absolute times, execution ids,
opaque tokens and trace ids. Each free value becomes a placeholder numbered by first appearance in
one scenario's record, so equality between two places survives (the same execution id in the
request and in ExecutionStarted). Times become relations: each history event gets `time`, its
timestamp against the events the contract relates it to (engine-rules R2.6): the previous
WorkflowStarted for a WorkflowStarted, the opening event for a resolution and its fireAt for a
TimerFired, its turn's WorkflowStarted for the others.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any

import base64
import binascii

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp

from taskhub_wire import pb
from taskhub_wire.kinds import PRODUCED_FIELDS, EventKind

from conformance.enginediff.record import Call, InstanceRecord, Recording

# Keys whose values are times, opaque tokens, or names an engine picks; compared only by equality.
TIME_KEYS = frozenset({"timestamp", "createdTimestamp", "lastUpdatedTimestamp", "scheduledStartTimestamp",
                       "fireAt", "completedTimestamp", "startedAt", "createdAt", "lastUpdatedAt"})
OPAQUE_KEYS = frozenset({"continuationToken", "executionId", "taskExecutionId",
                         "traceParent", "traceState", "spanID", "spanId", "traceId"})
# Dropped with their key: a completion token (daprd sends none, the TOK-FRESH-001 gap; its value is
# opaque) and the app ids a deployment names (daprd and durabletask-go stamp parentInstance.appID).
# The span id an engine with tracing stamps on ExecutionStarted is opaque too (the reference traces nothing).
DROPPED_KEYS = frozenset({"completionToken", "sourceAppID", "targetAppID", "appID", "appId", "sourceAppId",
                          "targetAppId", "router", "workflowSpanID"})
# A resolution's field -> (the field of the event that opened its operation, the id field naming it);
# both from the one kind table (taskhub_wire/kinds.py).
_RESOLVES = {k.field: (k.resolves.opened_by.field, k.ref_field) for k in EventKind if k.resolves is not None}
_MADE = PRODUCED_FIELDS


class Order(enum.StrEnum):
    AFTER = "after"
    SAME = "at"
    BEFORE = "before"
    MISSING = "missing"


def instant(text: Any) -> int | None:
    """Nanoseconds of an RFC 3339 time (proto JSON), None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    stamp = Timestamp()
    try:
        stamp.FromJsonString(text)
    except ValueError:
        return None
    return stamp.seconds * 1_000_000_000 + stamp.nanos


def _order(a: int | None, b: int | None) -> Order:
    if a is None or b is None:
        return Order.MISSING
    return Order.AFTER if a > b else Order.SAME if a == b else Order.BEFORE


def kind_of(event: Mapping[str, Any]) -> str:
    return next((k for k in event if k not in ("eventId", "timestamp", "router")), "")


def time_relations(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """For each event, its time against what the contract relates it to (see the module doc)."""
    out: list[str] = []
    opened: dict[tuple[str, int], int | None] = {}
    last_ws: int | None = None
    for ev in history:
        kind, t = kind_of(ev), instant(ev.get("timestamp"))
        if t is None:
            out.append("timestamp missing")
        elif kind == "workflowStarted":
            out.append("first turn" if last_ws is None else f"{_order(t, last_ws)} the previous WorkflowStarted")
        elif kind in _RESOLVES:
            opener, field = _RESOLVES[kind]
            cause = opened.get((opener, int(ev[kind].get(field, 0))))
            rel = f"{_order(t, cause)} its {opener}" if (opener, int(ev[kind].get(field, 0))) in opened \
                else f"no {opener}"
            if kind == "timerFired":
                rel += f", {_order(t, instant(ev[kind].get('fireAt')))} its fireAt"
            out.append(rel)
        else:
            out.append(f"{_order(t, last_ws)} its turn's WorkflowStarted" if last_ws is not None else "before any turn")
        if kind in _MADE and kind != "executionCompleted":
            opened[(kind, int(ev.get("eventId", 0)))] = t
        if kind == "workflowStarted" and t is not None:
            last_ws = t
    return out


class _Namer:
    """Placeholders by first appearance: the same value is always the same placeholder."""

    def __init__(self, ids: Mapping[str, str]) -> None:
        # Longest first, so a child id "<parent>:0001" is not cut at the parent's id.
        self.ids = sorted(ids.items(), key=lambda kv: -len(kv[0]))
        self.pattern = re.compile("|".join(re.escape(i) for i, _ in self.ids)) if self.ids else None
        self.seen: dict[tuple[str, str], str] = {}

    def placeholder(self, family: str, value: str) -> str:
        key = (family, value)
        if key not in self.seen:
            self.seen[key] = f"<{family}{sum(1 for f, _ in self.seen if f == family) + 1}>"
        return self.seen[key]

    def text(self, value: str) -> str:
        if self.pattern is None:
            return value
        names = dict(self.ids)
        return self.pattern.sub(lambda m: f"<{names[m.group(0)]}>", value)

    def walk(self, value: Any, key: str = "") -> Any:
        if isinstance(value, Mapping):
            return {k: self.walk(v, k) for k, v in value.items() if k not in DROPPED_KEYS}
        if isinstance(value, list | tuple):
            return [self.walk(v, key) for v in value]
        if isinstance(value, str):
            if key in TIME_KEYS:
                return "<time>"
            if key in OPAQUE_KEYS:
                return self.placeholder(key, value) if value else ""
            return self.text(value)
        return value


def _opaque_wrappers(value: Any) -> Any:
    """`executionId: {value: X}` (a StringValue) as `executionId: X`, so OPAQUE_KEYS sees it."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if k in OPAQUE_KEYS and isinstance(v, Mapping) and set(v) == {"value"}:
                v = v["value"]
            out[k] = _opaque_wrappers(v)
        return out
    if isinstance(value, list):
        return [_opaque_wrappers(v) for v in value]
    return value


def normalise(rec: Recording) -> dict[str, Any]:
    """The comparable form: {"instances": {name: {...}}, "calls": [...]} with placeholders."""
    # Only the scenario's own instances are names; another id (a child's "<parent>:0001") is
    # written with the names inside it.
    namer = _Namer({iid: name for iid, name in rec.names.items() if iid != name})
    instances: dict[str, Any] = {}
    # In name order, so that placeholders are numbered alike on both engines.
    for iid, inst in sorted(rec.instances.items(), key=lambda kv: rec.names.get(kv[0], kv[0])):
        name = rec.names.get(iid, iid)
        instances[namer.text(iid) if name == iid else name] = _instance(inst, namer)
    calls = [_call(c, namer) for c in rec.calls]
    return {"outcome": rec.outcome, "instances": instances, "calls": calls}


def _instance(inst: InstanceRecord, namer: _Namer) -> dict[str, Any]:
    times = time_relations(inst.history)
    history = []
    for ev, rel in zip(inst.history, times):
        e = namer.walk(_opaque_wrappers(dict(ev)))
        e.pop("router", None)  # R2.13: checks ignore router outside cross-app routing
        e["time"] = rel
        history.append(e)
    items = []
    for item in inst.work_items:
        it = namer.walk(_opaque_wrappers(_decoded_chunks(dict(item))))
        wr = it.get("workflowRequest")
        if isinstance(wr, dict):
            wr.pop("router", None)
            # pastEvents is the committed history (R2.3), compared as the history aspect; a difference
            # there would show again in every later work item.
            wr.pop("pastEvents", None)
            for part in ("newEvents",):
                events = wr.get(part, [])
                if isinstance(events, list):  # the proxy's transcript cuts huge lists to a note
                    wr[part] = [{k: v for k, v in e.items() if k != "router"} if isinstance(e, dict) else e
                                for e in events]
        items.append(it)
    return {"history": history, "work_items": items, "transitions": list(inst.transitions)}


def _decoded_chunks(item: dict[str, Any]) -> dict[str, Any]:
    """A propagated history's rawEvents as the events they encode, so the walk normalises their times,
    ids and routers like the history's and compares what is left (the bytes differ whenever a time does)."""
    for part in ("workflowRequest", "activityRequest"):
        req = item.get(part)
        history = req.get("propagatedHistory") if isinstance(req, dict) else None
        if not isinstance(history, dict) or not isinstance(history.get("chunks"), list):
            continue
        chunks = [dict(c, rawEvents=[_event(r) for r in c.get("rawEvents", [])]) if isinstance(c, dict) else c
                  for c in history["chunks"]]
        item = dict(item, **{part: dict(req, propagatedHistory=dict(history, chunks=chunks))})
    return item


def _event(raw: Any) -> Any:
    """One raw event (base64 of a HistoryEvent) decoded; what does not decode is compared as it is."""
    if not isinstance(raw, str):
        return raw
    try:
        ev = pb.HistoryEvent.FromString(base64.b64decode(raw, validate=True))
    except (binascii.Error, DecodeError):
        return raw
    return json_format.MessageToDict(ev)


def _call(call: Call, namer: _Namer) -> dict[str, Any]:
    return {"rpc": call.rpc, "request": namer.walk(_opaque_wrappers(call.request)), "code": call.code,
            "details": namer.text(call.details), "response": namer.walk(_opaque_wrappers(call.response))}
