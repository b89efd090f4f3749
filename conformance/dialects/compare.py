"""Comparing a worker's answer with the reference worker's: the rules of tests/worker/test_differential_dx.py.

An answer (a WorkflowResponse) is normalised to plain data: its actions as proto JSON with
payloads (`input`, `result`, `data`, `reason`) JSON-decoded, the custom status, the version name and
patches, and every field our schema does not declare. Dropped before comparing (as in the dx
test): `router` (routing is not part of the program language), `failureDetails.stackTrace` (the
SDK's traceback) and `failureDetails.errorMessage` (wording differs; the errorType is compared),
and the unknown fields `scheduleTask#4` / `createChildWorkflow#5` (the reserved router fields dx
still sends).

Two modes:
- `strict` (valid histories): everything else must be equal;
- `kind` (mutated histories): if either answer fails the workflow, only the failure kind is
  compared (completion status and errorType); otherwise as strict.

Actions are compared as an engine applies them (`engine_view`): what no engine can observe
(a later completion, actions after a CONTINUED_AS_NEW or TERMINATED one, an empty child instance
id the engine fills in) is not a difference.

A `Profile` holds what one target is known to do differently; the default profile is exact.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from taskhub_core.actions import child_instance_id
from taskhub_wire import pb
from taskhub_wire.kinds import ActionKind

IGNORED = frozenset({"router", "stackTrace", "errorMessage"})
IGNORED_UNKNOWN = frozenset({"scheduleTask#4", "createChildWorkflow#5"})
PAYLOAD_KEYS = frozenset({"input", "result", "data", "reason"})
FAILED = "ORCHESTRATION_STATUS_FAILED"


@dataclass(frozen=True)
class Profile:
    """What a worker target is known to do differently from the reference worker (documented per target)."""

    name: str = "exact"
    ignored: frozenset[str] = IGNORED
    ignored_unknown: frozenset[str] = IGNORED_UNKNOWN
    error_type_prefixes: tuple[str, ...] = ("durabletask.task.",)  # stripped from errorType before comparing
    compare_error_types: bool = True  # False: a failure's kind is only "FAILED"
    empty_custom_status_is_none: bool = False  # customStatus "" compared as unset
    empty_strings_unset: bool = False  # any "" field of an action compared as unset
    timer_origins: bool = True  # False: CreateTimer's origin is not compared
    notes: tuple[str, ...] = field(default_factory=tuple)


EXACT = Profile()
_PYTHON_SDKS = ("reference", "dapr-ext-workflow", "durabletask-dapr")
TIMER_ORIGINS = ("createTimer", "externalEvent", "activityRetry", "childWorkflowRetry")


def profile_for(target: str, capabilities: Iterable[str] | None = None) -> Profile:
    """The comparison profile of a worker target: exact, except what its capabilities or its SDK's
    language say it does differently (each reason is listed in `notes`)."""
    caps = set(capabilities) if capabilities is not None else None
    ignored = set(IGNORED)
    notes = []
    if caps is not None and "task_execution_id" not in caps:
        ignored.add("taskExecutionId")
        notes.append("no task_execution_id capability: ScheduleTask.taskExecutionId is not compared")
    elif caps is not None and "teid_uuid5" not in caps:
        ignored.add("taskExecutionId")
        notes.append("no teid_uuid5 capability: the SDK makes its own taskExecutionIds (the spec asks only for one "
                     "per call), so ScheduleTask.taskExecutionId is not compared with the reference's")
    origins = caps is None or "timer_origins" in caps
    if not origins:
        notes.append("no timer_origins capability: CreateTimer origins are not compared")
    compare_types = target in _PYTHON_SDKS or target.startswith("mutant:") or caps is None
    if not compare_types:
        notes.append("errorType names are the SDK language's error classes: a failure is compared by its "
                     "FAILED status only")
    empty_none = not compare_types  # the Go, Java and JS SDKs
    if empty_none:
        notes.append("the SDK's proto3 messages send empty strings (customStatus \"\", CreateTimer name \"\") "
                     "where the reference leaves fields unset: compared as unset")
    if not notes:
        return Profile(name=target)
    return Profile(name=target, ignored=frozenset(ignored), compare_error_types=compare_types,
                   empty_custom_status_is_none=empty_none, empty_strings_unset=empty_none, timer_origins=origins,
                   notes=tuple(notes))


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return {"json": json.loads(value)}
    except ValueError:
        return {"raw": value}


def _scrub(node: Any, ignored: frozenset[str]) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ignored:
                continue
            out[k] = _decode(v) if k in PAYLOAD_KEYS else _scrub(v, ignored)
        return out
    if isinstance(node, list):
        return [_scrub(v, ignored) for v in node]
    return node


def _drop_empty(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_empty(v) for k, v in node.items() if v != "" and v != {"raw": ""}}
    if isinstance(node, list):
        return [_drop_empty(v) for v in node]
    return node


def unknown_fields(msg: Message, path: str = "") -> list[str]:
    """Every field in `msg` (recursively) that our schema does not declare, as 'path#number'."""
    out = [f"{path}#{f.field_number}" for f in UnknownFieldSet(msg)]
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        sub = f"{path}.{fd.name}" if path else fd.name
        if fd.is_repeated:
            if not fd.message_type.GetOptions().map_entry:
                for i, item in enumerate(value):
                    out.extend(unknown_fields(item, f"{sub}[{i}]"))
        else:
            out.extend(unknown_fields(value, sub))
    return out


def normalise(resp: pb.WorkflowResponse, profile: Profile = EXACT) -> dict[str, Any]:
    version = resp.version if resp.HasField("version") else None
    custom = resp.customStatus.value if resp.HasField("customStatus") else None
    if profile.empty_custom_status_is_none and custom == "":
        custom = None
    actions = [_scrub(json_format.MessageToDict(a), profile.ignored) for a in resp.actions]
    if profile.empty_strings_unset:
        actions = [_drop_empty(a) for a in actions]
    if not profile.timer_origins:
        for a in actions:
            for origin in TIMER_ORIGINS:
                (a.get("createTimer") or {}).pop(origin, None)
    return {
        "actions": engine_view(actions, resp.instanceId, wire=True),
        "customStatus": custom,
        "version.name": version.name if version is not None and version.HasField("name") and version.name else None,
        "version.patches": list(version.patches) if version is not None else [],
        "unknownFields": [u for u in unknown_fields(resp)
                          if u.rsplit(".", 1)[-1] not in profile.ignored_unknown],
    }


def _json_or_text(value: Any) -> Any:
    """A payload nested below the action's own fields (e.g. carried events' inputs) as its JSON
    value, as normalise() compares it: the text's spacing is the SDK's JSON encoder's."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


_ENDS_ALL = ("ORCHESTRATION_STATUS_CONTINUED_AS_NEW", "ORCHESTRATION_STATUS_TERMINATED")


def engine_view(actions: list[dict[str, Any]], instance_id: str, *, wire: bool) -> list[dict[str, Any]]:
    """The actions as an engine applies them, so that answers differing only in what no engine
    can observe compare equal:
    - a CreateChildWorkflow without an instanceId gets "<instanceId>:" + 4 hex digits of its action
      id, as the engine names it (CHILD-CREATE-001, R3.5);
    - only the first CompleteWorkflow counts (R3.1: later completions are ignored);
    - nothing after a CONTINUED_AS_NEW completion (R3.1) or a TERMINATED one (LIFE-TERM-001: no
      activity is dispatched once terminated) counts;
    - in an answer that completes the workflow, an event wait's timer (the optional 9999-12-31 one, or
      one with an externalEvent origin) is moot: its only effect would be to resume a workflow that has
      ended, so whether a worker still sends one for a wait the turn settled is its dialect.
    `wire`: actions as normalise() makes them ({id, completeWorkflow: {...}}); else as
    conformance.scenario.wire.action_dict makes them ({CompleteWorkflow: {id, ...}})."""
    spell = (lambda k: k.field) if wire else (lambda k: k.value)
    child, done = spell(ActionKind.CREATE_CHILD_WORKFLOW), spell(ActionKind.COMPLETE_WORKFLOW)
    timer = spell(ActionKind.CREATE_TIMER)
    if any(isinstance(a.get(done), dict) for a in actions):
        actions = [a for a in actions if not _wait_timer(a.get(timer))]
    out: list[dict[str, Any]] = []
    completed = False
    for a in actions:
        body = a.get(done)
        if isinstance(body, dict):
            if completed:
                continue
            completed = True
            out.append(a)
            if body.get("workflowStatus") in _ENDS_ALL:
                break
            continue
        c = a.get(child)
        if isinstance(c, dict) and not c.get("instanceId"):
            aid = a.get("id", 0) if wire else c.get("id", 0)
            if isinstance(aid, int):
                a = {**a, child: {**c, "instanceId": child_instance_id(instance_id, aid)}}
        out.append(a)
    return out


def _wait_timer(body: Any) -> bool:
    """A CreateTimer body made for an event wait: externalEvent origin, or due 9999-12-31 with no other origin."""
    if not isinstance(body, dict):
        return False
    if "externalEvent" in body:
        return True
    return (isinstance(body.get("fireAt"), str) and body["fireAt"].startswith("9999-12-31")
            and not any(k in body for k in ("createTimer", "activityRetry", "childWorkflowRetry")))


def relax(node: Any, profile: Profile, *, answer: bool) -> Any:
    """An action dict or pattern ({Kind: {id, ...}}, conformance/scenario/wire.py) without what
    `profile` does not compare, so that a regression vector (`compare: fuzz`) is judged on another
    SDK as a campaign on it would judge it. `answer`: the worker's side (empty strings dropped)."""
    drop = set(profile.ignored) | (set() if profile.compare_error_types else {"errorType"})

    def walk(n: Any, kind: str | None) -> Any:
        if isinstance(n, dict):
            out = {}
            for k, v in n.items():
                if k in drop or (kind == ActionKind.CREATE_TIMER and not profile.timer_origins and k in TIMER_ORIGINS):
                    continue
                if answer and profile.empty_strings_unset and v == "":
                    continue
                out[k] = _json_or_text(v) if k in PAYLOAD_KEYS else walk(v, None)
            return out
        if isinstance(n, list):
            return [walk(v, None) for v in n]
        return n

    if not isinstance(node, dict):
        return node
    return {kind: walk(body, kind) for kind, body in node.items()}


def diff(ref: Any, got: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(ref, dict) and isinstance(got, dict):
        out = []
        for k in sorted(set(ref) | set(got)):
            sub = f"{path}.{k}" if path else k
            if k not in ref or k not in got:
                out.append((sub, ref.get(k, "<absent>"), got.get(k, "<absent>")))
            else:
                out.extend(diff(ref[k], got[k], sub))
        return out
    if isinstance(ref, list) and isinstance(got, list):
        if len(ref) != len(got):
            return [(f"{path}.length", len(ref), len(got)), (path, ref, got)]
        out = []
        for i, (a, b) in enumerate(zip(ref, got)):
            out.extend(diff(a, b, f"{path}[{i}]"))
        return out
    return [] if ref == got and type(ref) is type(got) else [(path, ref, got)]


def failure_kind(norm: dict[str, Any], profile: Profile = EXACT) -> str | None:
    """'FAILED:<errorType>' when the answer fails the workflow (its first completion), else None."""
    for a in norm["actions"]:
        cw = a.get("completeWorkflow")
        if cw is None:
            continue
        if cw.get("workflowStatus") != FAILED:
            return None
        if not profile.compare_error_types:
            return "FAILED"
        et = (cw.get("failureDetails") or {}).get("errorType", "")
        for prefix in profile.error_type_prefixes:
            et = et.removeprefix(prefix)
        return f"FAILED:{et}"
    return None


@dataclass(frozen=True)
class Comparison:
    diffs: tuple[tuple[str, Any, Any], ...]
    mode: str
    ref: dict[str, Any]
    got: dict[str, Any] | None

    @property
    def equal(self) -> bool:
        return not self.diffs

    def signature(self) -> str:
        """The kind of difference: action kinds missing or extra (as multisets), else the differing
        fields (`signature`)."""
        if self.got is not None and not any(p == "failure kind" for p, _, _ in self.diffs):
            ref_kinds = Counter(_kind(a) for a in self.ref.get("actions", []))
            got_kinds = Counter(_kind(a) for a in self.got.get("actions", []))
            if ref_kinds != got_kinds:
                parts = {f"actions: missing {k}" for k in ref_kinds - got_kinds} | \
                        {f"actions: extra {k}" for k in got_kinds - ref_kinds}
                rest = [d for d in self.diffs if not d[0].startswith("actions")]
                if rest:
                    parts |= set(signature(rest).split("; "))
                return "; ".join(sorted(parts))
        return signature(self.diffs)

    def describe(self, limit: int = 6) -> str:
        lines = [f"{p or '(answer)'}: reference {_short(a)} != worker {_short(b)}" for p, a, b in self.diffs[:limit]]
        if len(self.diffs) > limit:
            lines.append(f"... and {len(self.diffs) - limit} more")
        return "\n".join(lines)


def compare(ref: pb.WorkflowResponse, got: pb.WorkflowResponse | None, *, mode: str = "strict",
            profile: Profile = EXACT) -> Comparison:
    r = normalise(ref, profile)
    if got is None:
        return Comparison((("answer", "an answer", "no answer in time"),), mode, r, None)
    g = normalise(got, profile)
    if mode == "kind":
        fr, fg = failure_kind(r, profile), failure_kind(g, profile)
        if fr is not None or fg is not None:
            return Comparison(tuple([] if fr == fg else [("failure kind", fr, fg)]), mode, r, g)
    if not profile.compare_error_types:
        for side in (r, g):
            for a in side["actions"]:
                fd = (a.get("completeWorkflow") or {}).get("failureDetails")
                if fd is not None:
                    fd.pop("errorType", None)
    else:
        for side in (r, g):
            for a in side["actions"]:
                fd = (a.get("completeWorkflow") or {}).get("failureDetails")
                if fd is not None and "errorType" in fd:
                    for prefix in profile.error_type_prefixes:
                        fd["errorType"] = fd["errorType"].removeprefix(prefix)
    return Comparison(tuple(diff(r, g)), mode, r, g)


_INDEX = re.compile(r"\[\d+\]")
_PAYLOAD = re.compile(r"(\.(?:input|result|data|reason))\..*$")  # a payload's inside is one difference
_VALUED = ("errorType", "workflowStatus", "failure kind", "answer")


def signature(diffs: tuple[tuple[str, Any, Any], ...] | list[tuple[str, Any, Any]]) -> str:
    """What kind of difference this is, stable across examples: paths without indices (and, for
    statuses and error types, the two values)."""
    parts = set()
    for path, a, b in diffs:
        p = _PAYLOAD.sub(r"\1", _INDEX.sub("[]", path))
        if p.endswith(".length") or not path:
            continue
        if p == "actions" and isinstance(a, list) and isinstance(b, list):
            parts.add(f"actions={_kinds(a)}/{_kinds(b)}")
            continue
        if any(p.endswith(k) for k in _VALUED):
            parts.add(f"{p}={_short(a, 40)}/{_short(b, 40)}")
        elif p.startswith("actions[]") and p.count(".") == 1:
            parts.add(f"{p}:{'missing' if b == '<absent>' else 'extra' if a == '<absent>' else 'differs'}")
        else:
            parts.add(p)
    if not parts:  # only lengths differ: which action kinds
        parts = {"actions.length"}
    return "; ".join(sorted(parts))


def _kind(action: Any) -> str:
    return next((k for k in action if k not in ("id", "router")), "?") if isinstance(action, dict) else "?"


def _kinds(actions: list[Any]) -> str:
    return ",".join(next((k for k in a if k not in ("id", "router")), "?") for a in actions if isinstance(a, dict))


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."
