"""Workers' answers: an activity's result, a turn's actions, and what committing a turn sets off.

A completion is checked against what is out (its completion token), then turned into history and new work:
activities, timers, child instances, messages to other instances, continue-as-new, the parent's
notice when an instance finishes. Every completion is answered OK on the wire; the outcome says
what the engine did with it.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.management import cascade_terminate
from fake_sidecar.engine.model import (
    NEVER_NS, CompletionOutcome, InboxEntry, Instance, ParentRef, PendingActivity, Turn, TurnDecision, WorkRef,
    ts, ts_ns, wire,
)
from fake_sidecar.engine.store import Tx
from fake_sidecar.engine.turns import Outcome

if TYPE_CHECKING:
    from fake_sidecar.engine.core import Engine

log = logging.getLogger("fake_sidecar.engine")


def complete_activity(eng: Engine, resp: pb.ActivityResponse) -> CompletionOutcome:
    with eng.lock:
        eng.check_open()
        inst = eng.table.find(resp.instanceId)
        act = inst.activities.get(resp.taskId) if inst is not None else None
        if inst is None or act is None:
            eng.counters.unknown_activity += 1
            log.info("ignored CompleteActivityTask for %s/%s: no pending dispatch", resp.instanceId, resp.taskId)
            if inst is not None and eng.policy.applies_unmatched_activity(inst=inst, resp=resp):
                _queue_result(eng, inst, _result_event(eng, resp, task_execution_id=""))
                return CompletionOutcome.APPLIED
            return CompletionOutcome.UNKNOWN
        if not eng.dispatcher.token_ok(act.token, resp.completionToken):
            eng.counters.zombie_activity += 1
            eng.dispatcher.log_refused_token(f"CompleteActivityTask for {resp.instanceId}/{resp.taskId}",
                                             resp.completionToken)
            return CompletionOutcome.STALE
        ev = _result_event(eng, resp, task_execution_id=act.request.taskExecutionId)
        eng.dispatcher.settled(WorkRef.activity(inst.iid, resp.taskId), act.stream)
        del inst.activities[resp.taskId]
        _queue_result(eng, inst, ev, delete_activity=resp.taskId)
        return CompletionOutcome.APPLIED


def _result_event(eng: Engine, resp: pb.ActivityResponse, *, task_execution_id: str) -> pb.HistoryEvent:
    """TaskCompleted or TaskFailed for `resp`, carrying the execution id of the attempt it answers."""
    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(eng.ticker.now()))
    if resp.HasField("failureDetails"):
        ev.taskFailed.taskScheduledId = resp.taskId
        ev.taskFailed.failureDetails.CopyFrom(resp.failureDetails)
        ev.taskFailed.taskExecutionId = task_execution_id
    else:
        ev.taskCompleted.taskScheduledId = resp.taskId
        if resp.HasField("result"):
            ev.taskCompleted.result.CopyFrom(resp.result)
        ev.taskCompleted.taskExecutionId = task_execution_id
    return ev


def _queue_result(eng: Engine, inst: Instance, ev: pb.HistoryEvent, *, delete_activity: int | None = None) -> None:
    tx = Tx()
    if delete_activity is not None:
        tx.activity_delete.append((inst.iid, delete_activity))
    eng.table.add_inbox(inst, ev, tx)
    eng.table.commit(tx)
    eng.dispatcher.maybe_queue(inst)


def complete_turn(eng: Engine, resp: pb.WorkflowResponse) -> CompletionOutcome:
    with eng.lock:
        eng.check_open()
        if eng.vectors is not None and eng.vectors.claim_answer(resp):
            return CompletionOutcome.VECTOR
        inst = eng.table.find(resp.instanceId)
        if inst is None or inst.turn is None:
            eng.counters.unknown_turn += 1
            log.info("ignored CompleteWorkflowTask for %s: no turn in flight", resp.instanceId)
            return CompletionOutcome.UNKNOWN
        turn = inst.turn
        if not eng.dispatcher.token_ok(turn.token, resp.completionToken):
            eng.counters.zombie_turn += 1
            eng.dispatcher.log_refused_token(f"CompleteWorkflowTask for {resp.instanceId}", resp.completionToken)
            return CompletionOutcome.STALE
        inst.turn = None
        eng.dispatcher.settled(WorkRef.turn(inst.iid), turn.stream)
        try:
            outcome = eng.policy.decide_turn(inst=inst, new_events=turn.new_events, resp=resp, now_ns=eng.ticker.now())
        except Exception as exc:  # noqa: BLE001 - a bad answer must never lose the turn
            log.exception("could not apply the answer for %s", inst.iid)
            outcome = Outcome(TurnDecision.ABANDON, reason=f"the answer could not be applied: {exc!r}")
        decision = TurnDecision(outcome.kind)
        if decision is TurnDecision.ABANDON:
            abandon(eng, inst, outcome.reason)
            return CompletionOutcome.ABANDONED
        if decision is TurnDecision.STALL:
            assert outcome.stall is not None
            eng.table.stall(inst, outcome.stall)
            return CompletionOutcome.STALLED
        payload = eng.config.payload_limit()
        if payload:
            for req in outcome.activities:
                oversize = payload.activity_oversize(req)
                if oversize is not None:
                    eng.table.stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
                    return CompletionOutcome.STALLED
        _apply(eng, inst, turn, outcome)
        return CompletionOutcome.APPLIED


def abandon(eng: Engine, inst: Instance, reason: str) -> None:
    """R3.13: the turn is redelivered later (backing off), the RPC still answers OK."""
    eng.counters.abandoned_turns += 1
    inst.retries += 1
    delay_s = 0 if inst.retries == 1 else min(inst.retries - 1, 5)
    inst.retry_at = eng.clock.now_ns() + int(delay_s * 1e9)
    log.warning("abandoned the turn of %s (%s); redelivering in %ss", inst.iid, reason, delay_s)
    eng.dispatcher.maybe_queue(inst)


def _apply(eng: Engine, inst: Instance, turn: Turn, out: Outcome) -> None:
    table = eng.table
    tx = Tx()
    inst.custom_status = out.custom_status
    consumed = set(turn.consumed)
    for entry in [e for e in inst.inbox if e.seq in consumed]:
        inst.inbox.remove(entry)
        tx.inbox_delete.append((inst.iid, entry.seq))
    for ev in out.events:
        table.append_history(inst, ev, tx)
    if out.events:
        inst.last_updated_ns = ts_ns(out.events[-1].timestamp) or eng.clock.now_ns()
    for name in out.cancel_event_timers:
        eng._cancel_event_timer(inst, name, tx)  # R6.3, kept in core.py
    for req in out.activities:
        add_activity(eng, inst, req, tx)
    for _timer_id, fired in out.timers:
        if eng.policy.schedules_timer(inst=inst, fired=fired):
            fire_ns = min(ts_ns(fired.timerFired.fireAt), NEVER_NS)
            table.add_inbox(inst, fired, tx, visible_at=max(fire_ns, 1))
    for child in out.children:
        start_child(eng, inst, child.iid, child.start, child.parent_task_id, tx, detached=child.detached)
    for target_id, ev in out.sends:
        target = table.find(target_id)
        if target is None or target.terminal:
            log.info("dropped a message from %s to %s: no such running instance", inst.iid, target_id)
            continue
        table.add_inbox(target, ev, tx)
        eng.dispatcher.maybe_queue(target)
    if out.continue_as_new is not None:
        _continue_as_new(eng, inst, out.continue_as_new, tx)
    if inst.terminal:
        _finish(eng, inst, tx)
    if out.terminate_cascade is not None and out.terminate_cascade[1]:
        cascade_terminate(eng, inst, out.terminate_cascade[0], tx)
    try:
        table.commit(tx, inst)
    except errors.StoreFailed:
        restored = table.find(inst.iid)
        if restored is not None:  # redeliver the turn later, not in a tight loop against a full disk
            abandon(eng, restored, "the database refused to commit it")
        raise
    inst.retries = 0  # only now: a refused commit keeps backing off
    eng.dispatcher.maybe_queue(inst)
    table.notify(inst.iid)


def add_activity(eng: Engine, inst: Instance, req: pb.ActivityRequest, tx: Tx) -> None:
    act = PendingActivity(task_id=req.taskId, gen=inst.generation, request=req)
    inst.activities[req.taskId] = act
    tx.activity_put.append((inst.iid, req.taskId, inst.generation, wire(req)))
    eng.dispatcher.queue_activity(inst, act)


def start_child(eng: Engine, parent: Instance, child_id: str, start: pb.HistoryEvent, task_id: int, tx: Tx,
                *, detached: bool = False) -> None:
    table = eng.table
    existing = table.find(child_id)
    parent_ref = None if detached else ParentRef(iid=parent.iid, task_id=task_id, name=parent.name,
                                                 exec_id=parent.execution_id)
    if existing is not None:
        same_owner = (existing.parent is not None and existing.parent.iid == parent.iid
                      and existing.parent.task_id == task_id)
        if same_owner and not detached:
            return  # idempotent retry of the same create (R3.5 DAPR)
        if not existing.terminal:
            if not detached:
                fail = pb.HistoryEvent(eventId=-1, timestamp=ts(eng.ticker.now()))
                fail.childWorkflowInstanceFailed.taskScheduledId = task_id
                fd = fail.childWorkflowInstanceFailed.failureDetails
                fd.errorType = "WorkflowInstanceAlreadyExists"
                fd.errorMessage = f"a workflow with ID '{child_id}' is already running"
                table.add_inbox(parent, fail, tx)
            return
        table.forget(existing, tx)
    es = start.executionStarted
    now = ts_ns(start.timestamp)
    child = Instance(iid=child_id, seq=table.next_seq(tx), name=es.name,
                     generation=(existing.generation + 1) if existing is not None else 0,
                     execution_id=es.workflowInstance.executionId.value, created_ns=now,
                     last_updated_ns=now, parent=parent_ref)
    table.put(child)
    visible = 0
    if detached and es.HasField("scheduledStartTimestamp"):
        visible = min(max(0, ts_ns(es.scheduledStartTimestamp)), NEVER_NS)
    table.add_inbox(child, start, tx, visible_at=visible)
    tx.instances[child_id] = child.meta()
    eng.dispatcher.maybe_queue(child)
    table.notify(child_id)


def _continue_as_new(eng: Engine, inst: Instance, can: tuple[str | None, list[pb.HistoryEvent]], tx: Tx) -> None:
    """R2.10 / R3.10: a new generation; old timers and activities are forgotten."""
    new_input, carry = can
    old_start = inst.start_event()
    tx.history_clear.add(inst.iid)
    for entry in list(inst.inbox):
        # Keep events that arrived during the turn (not timers of the old generation).
        if entry.event.HasField("timerFired"):
            inst.inbox.remove(entry)
            tx.inbox_delete.append((inst.iid, entry.seq))
    for task_id in list(inst.activities):
        tx.activity_delete.append((inst.iid, task_id))
    inst.activities.clear()
    inst.history = []
    inst.started = False
    inst.completed = None
    inst.suspended = False
    inst.resolved = set()
    inst.opened = {"task": set(), "timer": set(), "child": set()}
    inst.timer_event_names = {}
    inst.children = []
    inst.patches = []
    inst.generation += 1
    inst.continuing = True
    now = eng.ticker.now()
    start = pb.HistoryEvent(eventId=-1, timestamp=ts(now))
    es = start.executionStarted
    es.name = inst.name
    if new_input is not None:
        es.input.value = new_input
    es.workflowInstance.instanceId = inst.iid
    inst.execution_id = uuid.uuid4().hex
    es.workflowInstance.executionId.value = inst.execution_id
    if old_start is not None and old_start.executionStarted.HasField("parentInstance"):
        es.parentInstance.CopyFrom(old_start.executionStarted.parentInstance)
    inst.created_ns = now
    # Start event and carry-over events go first, ahead of anything still queued.
    rest = list(inst.inbox)
    for entry in rest:
        tx.inbox_delete.append((inst.iid, entry.seq))
    inst.inbox = []
    eng.table.add_inbox(inst, start, tx)
    for ev in carry:
        eng.table.add_inbox(inst, ev, tx)
    for entry in rest:
        eng.table.add_inbox(inst, entry.event, tx, visible_at=entry.visible_at)


def _finish(eng: Engine, inst: Instance, tx: Tx) -> None:
    """Terminal: drop timers and pending activities (R6.2 DAPR) and tell the parent (R3.6)."""
    for entry in list(inst.inbox):
        if entry.event.HasField("timerFired"):
            inst.inbox.remove(entry)
            tx.inbox_delete.append((inst.iid, entry.seq))
    for task_id in list(inst.activities):
        tx.activity_delete.append((inst.iid, task_id))
    inst.activities.clear()
    ref = inst.parent
    if ref is None:
        return
    parent = eng.table.find(ref.iid)
    if parent is None or parent.terminal or parent.execution_id != ref.exec_id:
        return
    assert inst.completed is not None
    done = inst.completed.executionCompleted
    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(eng.ticker.now()))
    if done.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED:
        ev.childWorkflowInstanceCompleted.taskScheduledId = ref.task_id
        if done.HasField("result"):
            ev.childWorkflowInstanceCompleted.result.CopyFrom(done.result)
    else:
        ev.childWorkflowInstanceFailed.taskScheduledId = ref.task_id
        if done.HasField("failureDetails"):
            ev.childWorkflowInstanceFailed.failureDetails.CopyFrom(done.failureDetails)
    eng.table.add_inbox(parent, ev, tx)
    tx.instances[parent.iid] = parent.meta()
    eng.dispatcher.maybe_queue(parent)


def drop_for_terminal(eng: Engine, inst: Instance, visible: list[InboxEntry]) -> None:
    """R3.17: events for a finished instance are consumed and discarded (a recursive terminate still cascades)."""
    tx = Tx()
    for entry in visible:
        inst.inbox.remove(entry)
        tx.inbox_delete.append((inst.iid, entry.seq))
        et = entry.event.executionTerminated if entry.event.HasField("executionTerminated") else None
        if et is not None and et.recurse:
            cascade_terminate(eng, inst, et.input.value if et.HasField("input") else None, tx)
    eng.table.commit(tx)
