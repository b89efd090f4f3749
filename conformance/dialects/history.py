"""History dialects: the same turn as an SDK that numbers or reserves action ids differently writes it.

The reference worker writes histories the way dapr-ext-workflow does: action ids 1, 2, 3, ...
(`ids_from_one`), an indefinite wait_event reserving an id for a 9999-12-31 timer
(`event_wait_timer`), CreateTimer carrying its origin (`timer_origins`). An SDK without those
capabilities never sees such a history in production, so sending it one would only show the
dialect difference. A `Dialect` (from the worker target's capabilities) rewrites a turn into the
target's dialect before it is sent, and the answers back:

- no `event_wait_timer`: the sentinel TimerCreated events are removed from the turn and later
  ids move down to close the gaps (the reference executor replays such histories, as written by
  older SDKs); the reference answer is computed on that turn, and the sentinel timers it makes
  for new waits are removed from it and the ids after them renumbered;
- no `ids_from_one`: every action id and every reference to one (taskScheduledId, timerId,
  default child instance ids `<parent>:<id as 4 hex>`) is one less in what the worker is sent,
  and one more in its answer;
- no `timer_origins` / `task_execution_id`: those fields are not compared (`compare.Profile`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from taskhub_core.actions import child_instance_id
from taskhub_core.timestamps import copy_event
from taskhub_wire import pb
from taskhub_wire.kinds import PRODUCED_FIELDS, RESOLVING_FIELDS, EventKind

from conformance.dialects.turn import TurnCase, copy_event

SENTINEL_SECONDS = 253402300799
ACTION_EVENTS = PRODUCED_FIELDS  # events whose eventId is an action id


@dataclass(frozen=True)
class Dialect:
    id_base: int = 1
    optional_timers: bool = True

    @classmethod
    def from_capabilities(cls, caps: Iterable[str]) -> "Dialect":
        c = set(caps)
        return cls(id_base=1 if "ids_from_one" in c else 0, optional_timers="event_wait_timer" in c)

    @property
    def native(self) -> bool:
        return self.id_base == 1 and self.optional_timers

    def describe(self) -> str:
        if self.native:
            return "dapr-ext-workflow dialect (as the reference writes it)"
        parts = []
        if self.id_base == 0:
            parts.append("action ids from 0")
        if not self.optional_timers:
            parts.append("no 9999-12-31 timers for indefinite waits")
        return ", ".join(parts)

    # ------------------------------------------------------------------ turns

    def turn(self, case: TurnCase) -> TurnCase:
        """The turn in this dialect, before any id shift (what the reference answers in it)."""
        if self.optional_timers:
            return case
        whole = list(case.past) + list(case.new)
        gone = sorted(e.eventId for e in whole if is_sentinel_event(e))
        if not gone:
            return case
        def move(i: int) -> int:
            return i - sum(1 for g in gone if g < i) if i > 0 else i

        past = [_renumber(e, move, case.instance_id) for e in case.past if not is_sentinel_event(e)]
        new = [_renumber(e, move, case.instance_id) for e in case.new if not is_sentinel_event(e)]
        if not new:
            new = [copy_event(case.new[0])]
        return TurnCase(case.instance_id, tuple(past), tuple(new), case.form, note=case.note, stripped=True)

    def to_worker(self, case: TurnCase) -> TurnCase:
        """What the worker is sent: `turn(case)` with ids shifted to the dialect's base."""
        t = self.turn(case)
        if self.id_base == 1:
            return t
        shift = 1 - self.id_base
        def move(i: int) -> int:
            return i - shift if i > 0 else i

        return TurnCase(t.instance_id, tuple(_renumber(e, move, t.instance_id) for e in t.past),
                        tuple(_renumber(e, move, t.instance_id) for e in t.new), t.form, note=t.note,
                        stripped=t.stripped)

    def from_worker(self, resp: pb.WorkflowResponse | None, case: TurnCase) -> pb.WorkflowResponse | None:
        """The worker's answer with its ids moved back to the reference's base (ranked, like
        `reference`, when the dialect has no sentinel timers)."""
        if resp is None or self.native:
            return resp
        out = pb.WorkflowResponse()
        out.CopyFrom(resp)
        shift = 1 - self.id_base
        if shift:
            for a in out.actions:
                _renumber_action(a, lambda i: i + shift if i >= 0 else i, case.instance_id)
        t = self.turn(case)
        if self.optional_timers or not (t.stripped or any(is_sentinel_action(a) for a in out.actions)):
            return out
        return dense(out, t)

    def reference(self, resp: pb.WorkflowResponse, case: TurnCase) -> pb.WorkflowResponse:
        """The reference answer to `turn(case)` as this dialect would make it.

        Without `event_wait_timer`: the sentinel timers the answer makes are removed, and every
        action id is replaced by its rank among the ids of the turn and the answer, because the
        reference also reserved ids for waits whose timers the answer no longer holds (a completion
        clears them)."""
        if self.optional_timers:
            return resp
        if not case.stripped and not any(is_sentinel_action(a) for a in resp.actions):
            return resp  # no wait timer involved: ids are as the dialect makes them
        out = pb.WorkflowResponse()
        out.CopyFrom(resp)
        keep = [a for a in out.actions if not is_sentinel_action(a)]
        del out.actions[:]
        for a in keep:
            out.actions.add().CopyFrom(a)
        return dense(out, case)


def dense(resp: pb.WorkflowResponse, case: TurnCase) -> pb.WorkflowResponse:
    """Action ids replaced by their rank (from 1) among the action ids in history and the answer."""
    used = sorted({e.eventId for e in case.past
                   if e.WhichOneof("eventType") in ACTION_EVENTS and e.eventId > 0}
                  | {a.id for a in resp.actions if a.id > 0})
    rank = {i: n + 1 for n, i in enumerate(used)}
    out = pb.WorkflowResponse()
    out.CopyFrom(resp)
    for a in out.actions:
        _renumber_action(a, lambda i: rank.get(i, i), case.instance_id)
    return out


NATIVE = Dialect()


def is_sentinel_event(ev: pb.HistoryEvent) -> bool:
    return (ev.HasField("timerCreated") and ev.timerCreated.fireAt.seconds == SENTINEL_SECONDS
            and ev.timerCreated.WhichOneof("origin") in (None, "externalEvent"))


def is_sentinel_action(a: pb.WorkflowAction) -> bool:
    return (a.HasField("createTimer") and a.createTimer.fireAt.seconds == SENTINEL_SECONDS
            and a.createTimer.WhichOneof("origin") in (None, "externalEvent"))


def child_id(instance_id: str, value: str, move: Callable[[int], int]) -> str:
    m = re.fullmatch(re.escape(instance_id) + r":([0-9a-f]{4})", value)
    if not m:
        return value
    return child_instance_id(instance_id, move(int(m.group(1), 16)))


def _renumber(ev: pb.HistoryEvent, move: Callable[[int], int], instance_id: str) -> pb.HistoryEvent:
    out = copy_event(ev)
    kind = out.WhichOneof("eventType")
    if kind in ACTION_EVENTS and out.eventId >= 0:
        out.eventId = move(out.eventId)
    if kind in RESOLVING_FIELDS:
        body, ref = getattr(out, kind), EventKind.from_field(kind).ref_field
        setattr(body, ref, move(getattr(body, ref)))
    if kind == EventKind.CHILD_WORKFLOW_INSTANCE_CREATED.field:
        out.childWorkflowInstanceCreated.instanceId = child_id(instance_id, out.childWorkflowInstanceCreated.instanceId,
                                                                move)
    if kind == EventKind.TIMER_CREATED.field and out.timerCreated.HasField("childWorkflowRetry"):
        r = out.timerCreated.childWorkflowRetry
        r.instanceId = child_id(instance_id, r.instanceId, move)
    return out


def _renumber_action(a: pb.WorkflowAction, move: Callable[[int], int], instance_id: str) -> None:
    a.id = move(a.id)
    if a.HasField("createChildWorkflow") and a.createChildWorkflow.instanceId:
        a.createChildWorkflow.instanceId = child_id(instance_id, a.createChildWorkflow.instanceId, move)
    if a.HasField("createTimer") and a.createTimer.HasField("childWorkflowRetry"):
        r = a.createTimer.childWorkflowRetry
        r.instanceId = child_id(instance_id, r.instanceId, move)


def ranked(case: TurnCase) -> TurnCase:
    """`case` with its action ids replaced by their rank from 1 (and the references and default child
    ids with them): a history an SDK wrote in its own numbering (ids from 0, an id per event wait,
    no 9999-12-31 timers) as the reference numbers it, so the reference executor can replay it (it
    replays histories without the optional timers, as older SDKs write them)."""
    used = sorted({e.eventId for e in case.past if e.WhichOneof("eventType") in ACTION_EVENTS and e.eventId >= 0})
    if used == list(range(1, len(used) + 1)):
        return case
    rank = {i: n + 1 for n, i in enumerate(used)}

    def move(i: int) -> int:
        return rank.get(i, i)

    return TurnCase(case.instance_id, tuple(_renumber(e, move, case.instance_id) for e in case.past),
                    tuple(_renumber(e, move, case.instance_id) for e in case.new), case.form, note=case.note,
                    stripped=True)
