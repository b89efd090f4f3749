"""Fault rules: which message (by RPC, direction and content) gets which fault.

A rule is ``FaultRule(match=MessageMatch(...), action=...)``. Matching walks the decoded protobuf
message by dotted field paths (proto field names as in our schema, e.g. ``activityRequest.taskId``;
JSON names are accepted too), so scalar fields without presence match their default value
(``{"taskId": 0}`` matches task 0 although MessageToDict would omit it).

Path rules:

* ``a.b.c`` walks singular message fields; an unset message field (or unset wrapper / optional
  scalar) resolves to ``None`` (so ``{"result": None}`` matches "no result").
* Well-known wrappers (``StringValue`` ...) resolve to their ``value``; ``result`` and
  ``result.value`` are the same path.
* A repeated field fans out: ``actions.scheduleTask.name`` is every action's scheduled name and
  matches when ANY of them equals the expected value; ``actions.0.scheduleTask.name`` picks one.
* A map field takes the key as the next segment: ``tags.team``.
* Enums match by number or by name (``"ORCHESTRATION_STATUS_COMPLETED"``).
* An expected value that is a list means any-of. ``"kind": "activity" | "workflow"`` is a
  shorthand for WorkItem (which oneof member is set).

Firing: every rule counts the messages that match its rpc + direction + where. A rule fires on
match number ``k`` when ``k >= (nth or 1)`` and it has fired fewer than ``times`` times (``None``:
no limit). So ``nth=1`` (or ``None``) with ``times=1`` fires once on the first match, ``nth=2``
fires on the second, ``nth=None, times=None`` on every match. At most one rule fires per message:
the first eligible one in list order (the others still count the match).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, Kind, Method

from conformance.errors import InputError
from conformance.events import MessageDirection

ACTIONS: tuple[str, ...] = ("drop", "duplicate", "delay", "replay_later", "cut_stream")
DIRECTIONS: tuple[str, ...] = (MessageDirection.REQUEST, MessageDirection.ITEM, MessageDirection.RESPONSE)

# Which actions make sense where (direction by the RPC's kind).
_ALLOWED: Mapping[tuple[Kind, str], tuple[str, ...]] = MappingProxyType({
    (Kind.UNARY, "request"): ("drop", "duplicate", "delay", "replay_later", "cut_stream"),
    (Kind.UNARY, "response"): ("drop", "delay", "cut_stream"),
    (Kind.SERVER_STREAM, "request"): ("delay", "cut_stream"),
    (Kind.SERVER_STREAM, "item"): ("drop", "duplicate", "delay", "replay_later", "cut_stream"),
})

_WRAPPERS = frozenset(f"google.protobuf.{n}Value" for n in
                      ("String", "Bytes", "Bool", "Int32", "Int64", "UInt32", "UInt64", "Float", "Double"))
_JSON_FORMATTED = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})
_WORK_ITEM_KINDS = {"activity": "activityRequest", "workflow": "workflowRequest"}

METHODS: Mapping[str, Method] = MappingProxyType({**TASKHUB.methods, **DAPR_WORKFLOW.methods})


def _bad_rules(problems: Sequence[str]) -> InputError:
    """Bad fault rules: every problem, each with where it is (``<source>[<index>].<field>``)."""
    return InputError(problems, subject="fault rules")


def default_direction(rpc: str) -> str:
    method = METHODS.get(rpc)
    return "item" if method is not None and method.kind is Kind.SERVER_STREAM else "request"


def message_class(method: Method, direction: str) -> type[Message]:
    """The class of the message a rule with this direction looks at."""
    return method.request if direction == MessageDirection.REQUEST else method.response


@dataclass(frozen=True, kw_only=True)
class MessageMatch:
    """Which messages: ``rpc`` + ``direction`` + field values, optionally only from the nth on."""

    rpc: str
    direction: str = ""  # "" -> "item" for GetWorkItems, "request" for everything else
    where: Mapping[str, object] = field(default_factory=dict, hash=False)
    nth: int | None = None

    def __post_init__(self) -> None:
        if not self.direction and isinstance(self.rpc, str):
            object.__setattr__(self, "direction", default_direction(self.rpc))
        if isinstance(self.where, Mapping):
            object.__setattr__(self, "where", MappingProxyType(
                {k: tuple(v) if isinstance(v, list) else v for k, v in self.where.items()}))
        problems = [f"{loc}: {msg}" if loc else msg for loc, msg in _match_problems(self)]
        if problems:
            raise _bad_rules(problems)

    def matches(self, message: Message | None) -> bool:
        """Does the decoded message satisfy ``where``? (rpc/direction/nth are the proxy's business.)"""
        if not self.where:
            return True
        if message is None:  # undecodable bytes only match rules without content conditions
            return False
        return all(_key_matches(message, key, expected) for key, expected in self.where.items())

    def describe(self) -> str:
        nth = f"#{self.nth} " if self.nth is not None else ""
        conds = ", ".join(f"{k}={_show(v)}" for k, v in self.where.items())
        return f"{nth}{self.rpc} {self.direction}" + (f" where {conds}" if conds else "")


@dataclass(frozen=True, kw_only=True)
class FaultRule:
    """What to do to the matching messages (see the module docstring for firing rules)."""

    match: MessageMatch
    action: str
    delay_s: float = 0
    replay_after_s: float | None = None  # replay_later: None = held until FaultProxy.replay_pending()
    times: int | None = 1  # how many matches it fires on; None = every one
    # replay_later only: False (default) = the message is held back now and only the later copy is
    # sent (lost now, arrives late: a zombie); True = forwarded now AND a copy sent later (a late duplicate).
    forward_now: bool = False

    def __post_init__(self) -> None:
        problems = [f"{loc}: {msg}" if loc else msg for loc, msg in _rule_problems(self)]
        if problems:
            raise _bad_rules(problems)

    def describe(self) -> str:
        extra = ""
        if self.action == "delay":
            extra = f" {self.delay_s:g}s"
        elif self.action == "replay_later":
            extra = f" after {self.replay_after_s:g}s" if self.replay_after_s is not None else " (held)"
            if self.forward_now:
                extra += " forwarding now too"
        times = "" if self.times == 1 else (" every time" if self.times is None else f" x{self.times}")
        return f"{self.action}{extra} {self.match.describe()}{times}"


# --------------------------------------------------------------------------- validation


def _match_problems(m: MessageMatch) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(m.rpc, str) or m.rpc not in METHODS:
        out.append(("match.rpc", f"unknown rpc {m.rpc!r}; known: {', '.join(METHODS)}"))
        method = None
    else:
        method = METHODS[m.rpc]
    if m.direction not in DIRECTIONS:
        out.append(("match.direction", f"unknown direction {m.direction!r}; known: {', '.join(DIRECTIONS)}"))
    elif method is not None and (method.kind, m.direction) not in _ALLOWED:
        ok = [d for (k, d) in _ALLOWED if k is method.kind]
        out.append(("match.direction", f"{m.rpc} has no {m.direction!r} messages; use one of: {', '.join(ok)}"))
    if m.nth is not None and (isinstance(m.nth, bool) or not isinstance(m.nth, int) or m.nth < 1):
        out.append(("match.nth", f"nth must be a whole number >= 1 (1 = the first match) or null, got {m.nth!r}"))
    if not isinstance(m.where, Mapping):
        out.append(("match.where", f"where must be a mapping of field path -> value, got {type(m.where).__name__}"))
    elif method is not None and (method.kind, m.direction) in _ALLOWED:
        cls = message_class(method, m.direction)
        for key, expected in m.where.items():
            out.extend((f"match.where.{key}", p) for p in _where_problems(cls.DESCRIPTOR, key, expected))
    return out


def _rule_problems(r: FaultRule) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(r.match, MessageMatch):
        out.append(("match", f"match must be a MessageMatch, got {type(r.match).__name__}"))
    if r.action not in ACTIONS:
        out.append(("action", f"unknown action {r.action!r}; known: {', '.join(ACTIONS)}"))
    elif isinstance(r.match, MessageMatch):
        method = METHODS.get(r.match.rpc)
        allowed = _ALLOWED.get((method.kind, r.match.direction), ()) if method else ACTIONS
        if r.action not in allowed:
            out.append(("action", f"{r.action} does not apply to {r.match.rpc} {r.match.direction}s; "
                                  f"use one of: {', '.join(allowed)}"))
    if not _is_number(r.delay_s) or r.delay_s < 0:
        out.append(("delay_s", f"delay_s must be a number of seconds >= 0, got {r.delay_s!r}"))
    elif r.action == "delay" and r.delay_s <= 0:
        out.append(("delay_s", "action delay needs delay_s > 0 (seconds)"))
    elif r.action != "delay" and r.delay_s:
        out.append(("delay_s", f"delay_s is only used by action delay, not {r.action!r}"))
    if r.replay_after_s is not None:
        if not _is_number(r.replay_after_s) or r.replay_after_s < 0:
            out.append(("replay_after_s", f"replay_after_s must be seconds >= 0 or null, got {r.replay_after_s!r}"))
        elif r.action != "replay_later":
            out.append(("replay_after_s", f"replay_after_s is only used by action replay_later, not {r.action!r}"))
    if not isinstance(r.forward_now, bool):
        out.append(("forward_now", f"forward_now must be true or false, got {r.forward_now!r}"))
    elif r.forward_now and r.action != "replay_later":
        out.append(("forward_now", f"forward_now is only used by action replay_later, not {r.action!r}"))
    if r.times is not None and (isinstance(r.times, bool) or not isinstance(r.times, int) or r.times < 1):
        out.append(("times", f"times must be a whole number >= 1 or null (every match), got {r.times!r}"))
    return out


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _find_field(desc: Descriptor, name: str) -> FieldDescriptor | None:
    fd = desc.fields_by_name.get(name)
    if fd is not None:
        return fd
    for fd in desc.fields:
        if fd.json_name == name:
            return fd
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return desc.fields_by_name.get(snake)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry


def _where_problems(desc: Descriptor, key: object, expected: object) -> list[str]:
    if not isinstance(key, str) or not key:
        return [f"field paths are non-empty strings, got {key!r}"]
    if key == "kind" and "kind" not in desc.fields_by_name:
        if desc.full_name != _work_item_name():
            return [f"'kind' is a WorkItem shorthand; {desc.name} has no such field"]
        bad = [v for v in _alternatives(expected) if v not in _WORK_ITEM_KINDS]
        return [f"unknown work item kind {v!r}; known: {', '.join(_WORK_ITEM_KINDS)}" for v in bad]
    segments = key.split(".")
    leaf: FieldDescriptor | None = None
    cur: Descriptor | None = desc
    i = 0
    while i < len(segments):
        seg = segments[i]
        if cur is None:
            return [f"{leaf.name if leaf else '?'} is a {_type_name(leaf)}, it has no field {seg!r}"]
        if cur.full_name in _WRAPPERS:
            if seg != "value":
                return [f"{cur.name} only has 'value', not {seg!r}"]
            leaf, cur, i = cur.fields_by_name["value"], None, i + 1
            continue
        fd = _find_field(cur, seg)
        if fd is None:
            known = ", ".join(f.name for f in cur.fields)
            return [f"unknown field {seg!r} in {cur.name}; known: {known}"]
        i += 1
        if _is_map(fd):
            if i < len(segments):  # the key
                i += 1
                fd = fd.message_type.fields_by_name["value"]
            else:
                leaf, cur = fd, None
                break
        elif fd.is_repeated and i < len(segments) and segments[i].isdigit():
            i += 1
        leaf = fd
        cur = fd.message_type if fd.type == FieldDescriptor.TYPE_MESSAGE else None
    assert leaf is not None
    return [p for v in _alternatives(expected) for p in _value_problems(leaf, v)]


def _work_item_name() -> str:
    return TASKHUB.methods["GetWorkItems"].response.DESCRIPTOR.full_name


def _alternatives(expected: object) -> tuple[object, ...]:
    return tuple(expected) if isinstance(expected, (list, tuple)) else (expected,)


def _type_name(fd: FieldDescriptor | None) -> str:
    if fd is None:
        return "?"
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return fd.message_type.name
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return fd.enum_type.name
    return _SCALAR_NAMES.get(fd.cpp_type, "scalar")


_SCALAR_NAMES = {FieldDescriptor.CPPTYPE_STRING: "string", FieldDescriptor.CPPTYPE_BOOL: "bool",
                 FieldDescriptor.CPPTYPE_DOUBLE: "number", FieldDescriptor.CPPTYPE_FLOAT: "number"}


def _value_problems(fd: FieldDescriptor, v: object) -> list[str]:
    if v is None:
        return []
    if _is_map(fd):
        return [] if isinstance(v, Mapping) else [f"{fd.name} is a map; expected a mapping, got {v!r}"]
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        mt = fd.message_type.full_name
        if mt in _WRAPPERS:
            return _value_problems(fd.message_type.fields_by_name["value"], v)
        if mt in _JSON_FORMATTED:
            return [] if isinstance(v, str) else [f"{fd.name} is a {fd.message_type.name}; expected its JSON string"]
        return [] if isinstance(v, Mapping) else [
            f"{fd.name} is a {fd.message_type.name} message; compare a leaf field (e.g. {fd.name}.<field>) "
            f"or give a mapping, got {v!r}"]
    if fd.type == FieldDescriptor.TYPE_ENUM:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            return [f"{fd.name} is the enum {fd.enum_type.name}; expected a name or number, got {v!r}"]
        if isinstance(v, str) and v not in fd.enum_type.values_by_name:
            known = ", ".join(fd.enum_type.values_by_name)
            return [f"unknown {fd.enum_type.name} value {v!r}; known: {known}"]
        return []
    cpp = fd.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        ok = isinstance(v, (str, bytes))
    elif cpp == FieldDescriptor.CPPTYPE_BOOL:
        ok = isinstance(v, bool)
    elif cpp in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        ok = _is_number(v)
    else:
        ok = isinstance(v, int) and not isinstance(v, bool)
    kind = {"string": "a string", "bool": "a bool (true/false)", "number": "a number"}.get(
        _SCALAR_NAMES.get(cpp, ""), "an integer")
    return [] if ok else [f"{fd.name} is {kind}, got {v!r}"]


# --------------------------------------------------------------------------- matching


def _key_matches(message: Message, key: str, expected: object) -> bool:
    alternatives = _alternatives(expected)
    if key == "kind" and "kind" not in message.DESCRIPTOR.fields_by_name:
        member = message.WhichOneof("request") if message.DESCRIPTOR.oneofs_by_name.get("request") else None
        return any(_WORK_ITEM_KINDS.get(v) == member for v in alternatives if isinstance(v, str))
    for value, fd in _resolve(message, key.split(".")):
        if any(_equal(value, fd, alt) for alt in alternatives):
            return True
    return False


def _resolve(message: Message, segs: list[str]) -> Iterator[tuple[Any, FieldDescriptor | None]]:
    """Every (value, leaf field) the path reaches; None values mean 'not set'."""
    desc = message.DESCRIPTOR
    if desc.full_name in _WRAPPERS:
        if segs and segs[0] == "value":
            yield message.value, desc.fields_by_name["value"]
        return
    fd = _find_field(desc, segs[0])
    if fd is None:
        return
    rest = segs[1:]
    if _is_map(fd):
        mapping = getattr(message, fd.name)
        if not rest:
            yield {k: _plain(mapping[k], fd.message_type.fields_by_name["value"]) for k in mapping}, fd
            return
        key: Any = rest[0]
        key_fd = fd.message_type.fields_by_name["key"]
        if key_fd.cpp_type not in (FieldDescriptor.CPPTYPE_STRING, FieldDescriptor.CPPTYPE_BOOL):
            try:
                key = int(key)
            except ValueError:
                return
        value_fd = fd.message_type.fields_by_name["value"]
        if key not in mapping:
            yield None, value_fd
            return
        yield from _leaf(mapping[key], value_fd, rest[1:])
        return
    if fd.is_repeated:
        elements = list(getattr(message, fd.name))
        if rest and rest[0].isdigit():
            idx = int(rest[0])
            elements = elements[idx:idx + 1]
            rest = rest[1:]
        for el in elements:
            yield from _leaf(el, fd, rest)
        return
    if fd.has_presence and not message.HasField(fd.name):
        yield None, fd
        return
    yield from _leaf(getattr(message, fd.name), fd, rest)


def _leaf(value: Any, fd: FieldDescriptor, rest: list[str]) -> Iterator[tuple[Any, FieldDescriptor | None]]:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        mt = fd.message_type.full_name
        if mt in _WRAPPERS:
            if not rest or rest == ["value"]:
                yield value.value, fd.message_type.fields_by_name["value"]
            return
        if rest:
            yield from _resolve(value, rest)
            return
        yield _plain(value, fd), fd
        return
    if not rest:
        yield value, fd


def _plain(value: Any, fd: FieldDescriptor) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        if fd.message_type.full_name in _WRAPPERS:
            return value.value
        return json_format.MessageToDict(value, preserving_proto_field_name=True)
    return value


def _equal(value: Any, fd: FieldDescriptor | None, expected: object) -> bool:
    if expected is None or value is None:
        return expected is None and value is None
    if fd is not None and fd.type == FieldDescriptor.TYPE_ENUM and isinstance(value, int):
        if isinstance(expected, str):
            ev = fd.enum_type.values_by_number.get(value)
            return ev is not None and ev.name == expected
        return not isinstance(expected, bool) and value == expected
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(value, bytes) and isinstance(expected, str):
        return value == expected.encode()
    if isinstance(value, Mapping) and isinstance(expected, Mapping):
        return _submap(value, expected)
    return bool(value == expected)


def _submap(value: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """A mapping matches when every expected key is present with an equal value (a subset match)."""
    for k, v in expected.items():
        if k not in value:
            if v is None:
                continue
            return False
        got = value[k]
        if isinstance(v, Mapping) and isinstance(got, Mapping):
            if not _submap(got, v):
                return False
        elif got != v:
            return False
    return True


def _show(v: object) -> str:
    if isinstance(v, tuple):
        return "any of [" + ", ".join(_show(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


# --------------------------------------------------------------------------- plain data

_RULE_KEYS = ("match", "action", "delay_s", "replay_after_s", "times", "forward_now")
_MATCH_KEYS = ("rpc", "direction", "where", "nth")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)\s*$")


def _seconds(v: object) -> object:
    """Numbers pass; '250ms', '1.5s', '2m' become seconds; anything else is returned for validation."""
    if isinstance(v, str):
        m = _DURATION.match(v)
        if m:
            n = float(m.group(1))
            return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n
    return v


def parse_rules(data: object, *, source: str) -> tuple[FaultRule, ...]:
    """Rules from plain data (a list of dicts, as in scenario YAML); every problem is reported at once.

    ``[{"match": {"rpc": "CompleteActivityTask", "where": {"taskId": 2}, "nth": 1}, "action": "replay_later"}]``.
    ``delay_s`` / ``replay_after_s`` take seconds or a duration string (``"250ms"``, ``"1.5s"``, ``"2m"``).
    Raises InputError listing each problem as ``<source>[<index>].<field>: <what is wrong>``.
    """
    if data is None:
        return ()
    if not isinstance(data, (list, tuple)):
        raise _bad_rules([f"{source}: fault rules are a list of mappings, got {type(data).__name__}"])
    problems: list[str] = []
    rules: list[FaultRule] = []
    for i, raw in enumerate(data):
        where_at = f"{source}[{i}]"
        if isinstance(raw, FaultRule):
            rules.append(raw)
            continue
        if not isinstance(raw, Mapping):
            problems.append(f"{where_at}: a fault rule is a mapping with match and action, got {raw!r}")
            continue
        local: list[tuple[str, str]] = []
        local += _unknown_keys(raw, _RULE_KEYS, "")
        if "action" not in raw:
            local.append(("action", f"missing; one of: {', '.join(ACTIONS)}"))
        m = raw.get("match")
        if not isinstance(m, Mapping):
            local.append(("match", "missing or not a mapping; give at least {rpc: <method name>}"
                          if m is None else f"must be a mapping, got {m!r}"))
            m = None
        else:
            local += _unknown_keys(m, _MATCH_KEYS, "match.")
            if "rpc" not in m:
                local.append(("match.rpc", f"missing; one of: {', '.join(METHODS)}"))
        if m is not None:
            where = m.get("where") or {}
            match = MessageMatch.__new__(MessageMatch)
            for name, value in (("rpc", m.get("rpc", "")), ("direction", m.get("direction") or ""),
                                ("where", dict(where) if isinstance(where, Mapping) else where),
                                ("nth", m.get("nth"))):
                object.__setattr__(match, name, value)
            if not match.direction and isinstance(match.rpc, str):
                object.__setattr__(match, "direction", default_direction(match.rpc))
            local += [p for p in _match_problems(match) if "rpc" in m or p[0] != "match.rpc"]
        times = raw.get("times", 1)
        rule = FaultRule.__new__(FaultRule)
        for name, value in (("match", match if m is not None else None), ("action", raw.get("action")),
                            ("delay_s", _seconds(raw.get("delay_s", 0))),
                            ("replay_after_s", _seconds(raw.get("replay_after_s"))), ("times", times),
                            ("forward_now", raw.get("forward_now", False))):
            object.__setattr__(rule, name, value)
        local += [p for p in _rule_problems(rule)
                  if not (p[0] == "match" and m is None) and not (p[0] == "action" and "action" not in raw)]
        if local:
            problems.extend(f"{where_at}.{loc}: {msg}" for loc, msg in local)
            continue
        try:
            rules.append(FaultRule(match=MessageMatch(rpc=match.rpc, direction=match.direction,
                                                      where=match.where, nth=match.nth),
                                   action=rule.action, delay_s=float(rule.delay_s),
                                   replay_after_s=None if rule.replay_after_s is None else float(rule.replay_after_s),
                                   times=rule.times, forward_now=rule.forward_now))
        except InputError as exc:  # pragma: no cover - the checks above are the same
            problems.extend(f"{where_at}: {p.what}" for p in exc.problems)
    if problems:
        raise _bad_rules(problems)
    return tuple(rules)


def _unknown_keys(raw: Mapping[str, Any], known: Iterable[str], prefix: str) -> list[tuple[str, str]]:
    known = tuple(known)
    return [(f"{prefix}{k}", f"unknown key {k!r}; known: {', '.join(known)}") for k in raw if k not in known]


__all__ = ["ACTIONS", "DIRECTIONS", "FaultRule", "MessageMatch", "parse_rules"]
