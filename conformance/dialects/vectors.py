"""A turn-level vector in the dialect of the worker it is sent to.

Vectors are written as the reference (and dapr-ext-workflow) writes histories: action ids from 1
and a 9999-12-31 timer reserved for every indefinite event wait. A worker that numbers from 0
(no `ids_from_one`: the Go and Java SDKs) or makes no such timers (no `event_wait_timer`) never
sees that history in production, so the vector is rewritten the way `conformance.dialects.history`
rewrites fuzzed turns: the history it is sent has the sentinel timers removed and its ids moved to
the worker's base; the worker's answer has its ids moved back; and where sentinel timers were
involved, the expected and the actual action ids are both compared by rank (the reference reserves
ids for wait timers such a worker never makes). The point of a vector is the replay decision, not
the id base, which is the worker's choice (RPL-IDS-001, INFO).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskhub_wire.kinds import ActionKind

from conformance.dialects.compare import TIMER_ORIGINS
from conformance.dialects.history import ACTION_EVENTS, Dialect, child_id, is_sentinel_event
from conformance.dialects.turn import TurnCase
from conformance.scenario.model import Vector

_SENTINEL_TEXT = "9999-12-31T23:59:59"  # dialect.SENTINEL_SECONDS as a scenario writes it


@dataclass(frozen=True)
class VectorTurn:
    """What the worker is sent, the expected actions in the terms its answer is compared in, and
    how its answer is brought into those terms."""

    instance_id: str
    past: tuple[Any, ...]
    new: tuple[Any, ...]
    expected: tuple[Any, ...]
    to_reference: Callable[[dict[str, Any] | None], dict[str, Any] | None]
    note: str = ""  # how the vector was rewritten, for failure messages; "" when sent as written


def in_dialect(vec: Vector, *, capabilities: Iterable[str], programs: Any = None) -> VectorTurn:
    """`programs`: the scenario's program documents (an indefinite wait_event there means the
    reference reserved ids for wait timers even where no timer is left in the turn or answer)."""
    caps = set(capabilities)
    dialect = Dialect.from_capabilities(caps)
    involves_sentinel = (any(is_sentinel_event(e) for e in (*vec.past, *vec.new))
                         or any(_is_sentinel_pattern(p) for p in vec.actions) or _indefinite_wait(programs))
    strip = not dialect.optional_timers and involves_sentinel
    patterns = tuple(vec.actions)
    if "timer_origins" not in caps:  # the SDK's CreateTimer has no origin: what a vector says of it is not compared
        patterns = tuple(_without_origin(p) for p in patterns)
    if "teid_uuid5" not in caps:  # the SDK makes its own ids: only "one, non-empty" is asked (ACT-TEID-002)
        patterns = tuple(_any_teid(p) for p in patterns)
    if dialect.id_base == 1 and not strip:
        return VectorTurn(vec.instance_id, tuple(vec.past), tuple(vec.new), patterns, lambda a: a)
    if not strip:
        dialect = Dialect(id_base=dialect.id_base, optional_timers=True)
    case = TurnCase(vec.instance_id, tuple(vec.past), tuple(vec.new), "dispatched")
    sent = dialect.to_worker(case)
    shift = 1 - dialect.id_base
    iid = vec.instance_id

    def back(i: int) -> int:
        return i + shift if i >= 0 else i

    if not strip:
        def to_reference(answer: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if answer is None else {**answer, "actions": [_renumber(a, back, iid) for a in answer["actions"]]}

        return VectorTurn(sent.instance_id, sent.past, sent.new, patterns, to_reference,
                          note=f"sent with action ids from {dialect.id_base}; answer ids moved back by {shift}")

    # Sentinel timers removed: rank ids among the (stripped) history's action ids and the answer's.
    past_ids = {e.eventId for e in dialect.turn(case).past if e.WhichOneof("eventType") in ACTION_EVENTS
                and e.eventId > 0}
    expected = [q for p, q in zip(vec.actions, patterns) if not _is_sentinel_pattern(p)]
    expected = [_renumber(p, _ranker(past_ids, expected), iid) for p in expected]

    def to_reference(answer: dict[str, Any] | None) -> dict[str, Any] | None:
        if answer is None:
            return None
        got = [_renumber(a, back, iid) for a in answer["actions"]]
        return {**answer, "actions": [_renumber(a, _ranker(past_ids, got), iid) for a in got]}

    return VectorTurn(sent.instance_id, sent.past, sent.new, tuple(expected), to_reference,
                      note=(f"sent without its 9999-12-31 wait timers{f' and with action ids from 0' if shift else ''}; "
                            "expected and actual action ids compared by rank"))


def _ranker(past_ids: set[int], actions: Sequence[Any]) -> Callable[[int], int]:
    ids = {body["id"] for a in actions for body in _bodies(a) if isinstance(body.get("id"), int) and body["id"] > 0}
    rank = {i: n + 1 for n, i in enumerate(sorted(past_ids | ids))}
    return lambda i: rank.get(i, i)


def _bodies(action: Any) -> list[dict[str, Any]]:
    if not isinstance(action, Mapping):
        return []
    return [b for b in action.values() if isinstance(b, Mapping)]


def _renumber(action: Any, move: Callable[[int], int], instance_id: str) -> Any:
    """An action (dict or pattern) with its id and default child instance ids moved; wildcards,
    captures and regexes stay as written."""
    if not isinstance(action, Mapping):
        return action
    out: dict[str, Any] = {}
    for kind, body in action.items():
        if not isinstance(body, Mapping):
            out[kind] = body
            continue
        body = dict(body)
        if isinstance(body.get("id"), int) and not isinstance(body["id"], bool):
            body["id"] = move(body["id"])
        if kind == ActionKind.CREATE_CHILD_WORKFLOW and isinstance(body.get("instanceId"), str):
            body["instanceId"] = child_id(instance_id, body["instanceId"], move)
        retry = body.get("childWorkflowRetry") if kind == ActionKind.CREATE_TIMER else None
        if isinstance(retry, Mapping) and isinstance(retry.get("instanceId"), str):
            body["childWorkflowRetry"] = {**retry, "instanceId": child_id(instance_id, retry["instanceId"], move)}
        out[kind] = body
    return out


def _indefinite_wait(node: Any) -> bool:
    if isinstance(node, Mapping):
        wait = node.get("wait_event")
        if isinstance(wait, str) or (isinstance(wait, Mapping) and "timeout" not in wait):
            return True
        return any(_indefinite_wait(v) for v in node.values())
    if isinstance(node, list):
        return any(_indefinite_wait(v) for v in node)
    return False


def _any_teid(pattern: Any) -> Any:
    body = pattern.get("ScheduleTask") if isinstance(pattern, Mapping) else None
    if not isinstance(body, Mapping) or not isinstance(body.get("taskExecutionId"), str) \
            or body["taskExecutionId"].startswith(("re:", "!", "${")):
        return pattern
    return {**pattern, "ScheduleTask": {**body, "taskExecutionId": "re:.+"}}


def _without_origin(pattern: Any) -> Any:
    body = pattern.get("CreateTimer") if isinstance(pattern, Mapping) else None
    if not isinstance(body, Mapping):
        return pattern
    return {**pattern, "CreateTimer": {k: v for k, v in body.items() if k not in TIMER_ORIGINS}}


def _is_sentinel_pattern(pattern: Any) -> bool:
    body = pattern.get("CreateTimer") if isinstance(pattern, Mapping) else None
    if not isinstance(body, Mapping):
        return False
    fire = body.get("fireAt")
    return isinstance(fire, str) and fire.startswith(_SENTINEL_TEXT) and not any(
        k in body for k in ("createTimer", "activityRetry", "childWorkflowRetry"))


__all__ = ["VectorTurn", "in_dialect"]
