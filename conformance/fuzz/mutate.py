"""Mutated histories: a valid turn (past, new) broken in one of the ways an engine or a store may break it.

Every mutation keeps `new` non-empty (a worker is never sent an empty turn) and only uses event
kinds of our schema, so the result can be written as a scenario vector. Each returns a short
description that names what was changed.
"""

from __future__ import annotations

from collections.abc import Callable

from taskhub_core.timestamps import copy_event
from taskhub_wire import pb
from taskhub_wire.kinds import RESOLVING_FIELDS, EventKind

from conformance.fuzz.interleave import Chooser, TurnCase, pick

Events = list[pb.HistoryEvent]
MUTATIONS = ("reorder", "duplicate", "drop", "unknown_id", "truncate", "wrong_patches", "unknown_kind", "rename")
K = EventKind
# Kinds a turn's events never hold (never recorded, or made by actions, or written outside turns), in the
# order the fuzzer picks them (a seed's campaign depends on it).
UNKNOWN_KINDS = tuple(k.field for k in (K.WORKFLOW_COMPLETED, K.EVENT_SENT, K.CONTINUE_AS_NEW,
                                        K.DETACHED_WORKFLOW_INSTANCE_CREATED, K.EXECUTION_STALLED))
# Events an engine may record twice (engine-rules R6.5, R6.7: an event raised twice, a suspended instance
# suspended again, a running one resumed): a copy of one is a reachable history, held to the contract by
# the self-oracle's perturbations, not an impossible one, so `duplicate` never copies them.
REACHABLE_TWICE = frozenset(k.field for k in (K.EVENT_RAISED, K.EXECUTION_SUSPENDED, K.EXECUTION_RESUMED))
# Events with a name a changed deployment could rename.
_NAMED = frozenset(k.field for k in (K.TASK_SCHEDULED, K.CHILD_WORKFLOW_INSTANCE_CREATED, K.EXECUTION_STARTED))


def _kind(ev: pb.HistoryEvent) -> str:
    return ev.WhichOneof("eventType") or "?"


def _where(part: str, i: int, ev: pb.HistoryEvent) -> str:
    return f"{part}[{i}] {_kind(ev)}" + (f"#{ev.eventId}" if ev.eventId >= 0 else "")


def _split(c: Chooser, past: Events, new: Events, *, new_first: bool = False) -> tuple[str, Events]:
    """Which part to change: past (if any) or new."""
    if past and (not new_first and c.int(0, 1) == 0):
        return "past", past
    return "new", new


def _reorder(c: Chooser, past: Events, new: Events) -> str | None:
    part, evs = _split(c, past, new)
    if len(evs) < 2:
        return None
    i = c.int(0, len(evs) - 2)
    j = c.int(i + 1, len(evs) - 1)
    desc = f"swap {_where(part, i, evs[i])} and {_where(part, j, evs[j])}"
    evs[i], evs[j] = evs[j], evs[i]
    return desc


def _duplicate(c: Chooser, past: Events, new: Events) -> str | None:
    part, evs = _split(c, past, new)
    spots = [i for i, e in enumerate(evs) if _kind(e) not in REACHABLE_TWICE]
    if not spots:
        return None
    i = pick(c, spots)
    evs.insert(i + 1, copy_event(evs[i]))
    return f"duplicate {_where(part, i, evs[i])}"


def _drop(c: Chooser, past: Events, new: Events) -> str | None:
    part, evs = _split(c, past, new)
    if part == "new" and len(evs) < 2:
        return None
    i = c.int(0, len(evs) - 1)
    desc = f"drop {_where(part, i, evs[i])}"
    del evs[i]
    return desc


def _unknown_id(c: Chooser, past: Events, new: Events) -> str | None:
    spots = [(part, i) for part, evs in (("past", past), ("new", new)) for i, e in enumerate(evs)
             if _kind(e) in RESOLVING_FIELDS]
    if not spots:
        return None
    part, i = pick(c, spots)
    ev = (past if part == "past" else new)[i]
    kind = _kind(ev)
    body = getattr(ev, kind)
    top = max([e.eventId for e in past + new] + [0])
    new_id = pick(c, (top + 1, top + 7, 999, -1))
    ref = EventKind.from_field(kind).ref_field
    old = getattr(body, ref)
    setattr(body, ref, new_id)
    return f"{_where(part, i, ev)}: id {old} -> {new_id} (no such operation)"


def _truncate(c: Chooser, past: Events, new: Events) -> str | None:
    whole = past + new
    if len(whole) < 2:
        return None
    cut = c.int(1, len(whole) - 1)
    if cut == len(past):
        return None
    end = c.int(cut + 1, len(whole))
    past[:], new[:] = whole[:cut], whole[cut:end]
    return f"cut at event {cut} of {len(whole)} (new = events {cut}..{end - 1})"


def _wrong_patches(c: Chooser, past: Events, new: Events) -> str | None:
    spots = [(part, i) for part, evs in (("past", past), ("new", new)) for i, e in enumerate(evs)
             if e.HasField("workflowStarted")]
    if not spots:
        return None
    part, i = pick(c, spots)
    ws = (past if part == "past" else new)[i].workflowStarted
    had = list(ws.version.patches) if ws.HasField("version") else []
    how = c.int(0, 3)
    if how == 0 and had:
        del ws.version.patches[c.int(0, len(had) - 1)]
    elif how == 1 and len(had) > 1:
        ws.version.patches[:] = list(reversed(had))
    elif how == 2:
        ws.version.name = pick(c, ("v9", "v1", "v2", ""))
        return f"{part}[{i}] WorkflowStarted version name {ws.version.name!r}"
    else:
        ws.version.patches.append(pick(c, ("p1", "p2", "p9")))
    return f"{part}[{i}] WorkflowStarted patches {had} -> {list(ws.version.patches)}"


def _unknown_kind(c: Chooser, past: Events, new: Events) -> str | None:
    part, evs = _split(c, past, new, new_first=c.int(0, 2) > 0)
    kind = pick(c, UNKNOWN_KINDS)
    ev = pb.HistoryEvent(eventId=-1)
    ev.timestamp.CopyFrom(evs[-1].timestamp if evs and evs[-1].HasField("timestamp") else new[0].timestamp)
    body = getattr(ev, kind)
    body.SetInParent()
    if kind == K.EVENT_SENT.field:
        ev.eventId = max([e.eventId for e in past + new] + [0]) + 1
        body.instanceId, body.name = "elsewhere", "ping"
    elif kind == K.DETACHED_WORKFLOW_INSTANCE_CREATED.field:
        ev.eventId = max([e.eventId for e in past + new] + [0]) + 1
        body.instanceId = "detached-1"
    elif kind == K.EXECUTION_STALLED.field:
        body.reason = pb.PATCH_MISMATCH
        body.description = "stalled"
    i = c.int(1 if part == "new" else 0, len(evs))
    evs.insert(i, ev)
    return f"insert {kind} at {part}[{i}]"


def _rename(c: Chooser, past: Events, new: Events) -> str | None:
    spots = [(part, i) for part, evs in (("past", past), ("new", new)) for i, e in enumerate(evs)
             if _kind(e) in _NAMED]
    if not spots:
        return None
    part, i = pick(c, spots)
    ev = (past if part == "past" else new)[i]
    body = getattr(ev, _kind(ev))
    old = body.name
    body.name = pick(c, ("echo", "fail", "renamed", "c_echo"))
    if body.name == old:
        return None
    return f"{_where(part, i, ev)}: name {old!r} -> {body.name!r}"


_BY_NAME: dict[str, Callable[[Chooser, Events, Events], str | None]] = {
    "reorder": _reorder, "duplicate": _duplicate, "drop": _drop, "unknown_id": _unknown_id, "truncate": _truncate,
    "wrong_patches": _wrong_patches, "unknown_kind": _unknown_kind, "rename": _rename,
}


def mutate(c: Chooser, case: TurnCase, *, rounds: int = 1) -> TurnCase | None:
    """A mutated copy of `case` (1..rounds mutations), or None if no chosen mutation applied."""
    past = [copy_event(e) for e in case.past]
    new = [copy_event(e) for e in case.new]
    notes = []
    for _ in range(rounds):
        name = pick(c, MUTATIONS)
        desc = _BY_NAME[name](c, past, new)
        if desc is not None:
            notes.append(f"{name}: {desc}")
    if not notes or not new:
        return None
    return TurnCase(case.instance_id, tuple(past), tuple(new), "mutated", note="; ".join(notes))
