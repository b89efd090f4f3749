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

from taskhub_core import machine
from taskhub_core.actions import child_result
from taskhub_core.history import fresh_opened
from taskhub_core.inbox import next_generation, timer_due_ns, without_timers
from taskhub_core.incidents import Incident, IncidentKind
from taskhub_core.patches import REFUSALS_BEFORE_STALL, refusal_stall
from taskhub_core.turn import Decision, TurnKind, abandon as abandoned
from taskhub_wire import pb

from fake_sidecar.engine import crossapp, errors
from fake_sidecar.engine.management import cascade_terminate
from fake_sidecar.engine.model import (
    NEVER_NS, CompletionOutcome, InboxEntry, Instance, ParentRef, PendingActivity, Turn, WorkRef, ts, ts_ns, wire,
)
from fake_sidecar.engine.store import Tx
from fake_sidecar.engine.turns import core_state

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
            eng.incidents.record(Incident(kind=IncidentKind.NO_PENDING, instance=resp.instanceId,
                                          text=f"CompleteActivityTask for task {resp.taskId}: no pending dispatch"))
            if inst is not None and eng.policy.applies_unmatched_activity(inst=inst, resp=resp):
                _queue_result(eng, inst, _result_event(eng, resp, task_execution_id=""))
                return CompletionOutcome.APPLIED
            return CompletionOutcome.UNKNOWN
        if not eng.dispatcher.token_ok(act.token, resp.completionToken):
            eng.counters.zombie_activity += 1
            eng.dispatcher.log_refused_token(f"CompleteActivityTask for {resp.instanceId}/{resp.taskId}",
                                             resp.completionToken, instance=resp.instanceId)
            return CompletionOutcome.STALE
        ev = _result_event(eng, resp, task_execution_id=act.request.taskExecutionId)
        if act.router is not None:
            ev.router.CopyFrom(act.router)  # R11.3: the result carries its TaskScheduled's router (executor.go:224-251)
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
            eng.incidents.record(Incident(kind=IncidentKind.NO_PENDING, instance=resp.instanceId,
                                          text="CompleteWorkflowTask: no turn in flight"))
            return CompletionOutcome.UNKNOWN
        turn = inst.turn
        if not eng.dispatcher.token_ok(turn.token, resp.completionToken):
            eng.counters.zombie_turn += 1
            eng.dispatcher.log_refused_token(f"CompleteWorkflowTask for {resp.instanceId}", resp.completionToken,
                                             instance=resp.instanceId)
            return CompletionOutcome.STALE
        inst.turn = None
        eng.dispatcher.settled(WorkRef.turn(inst.iid), turn.stream)
        try:
            outcome = eng.policy.decide_turn(inst=inst, new_events=turn.new_events, resp=resp, now_ns=eng.ticker.now())
        except Exception as exc:  # noqa: BLE001 - a bad answer must never lose the turn
            log.exception("could not apply the answer for %s", inst.iid)
            outcome = abandoned(f"the answer could not be applied: {exc!r}")
        if outcome.kind is TurnKind.ABANDON:
            kind = (IncidentKind.STALE_ANSWER if outcome.stale is not None else IncidentKind.MALFORMED_ANSWER
                    if outcome.malformed else IncidentKind.ANSWER_NOT_APPLIED)
            eng.incidents.record(Incident(kind=kind, instance=inst.iid, action=outcome.stale,
                                          text=f"refused the answer ({outcome.reason}); the turn is delivered again"))
            abandon(eng, inst, outcome.reason, refused_answer=True)
            return CompletionOutcome.ABANDONED
        if outcome.kind is TurnKind.STALL:
            assert outcome.stall is not None
            eng.table.stall(inst, outcome.stall)
            return CompletionOutcome.STALLED
        routes = crossapp.prepare(eng.config, inst, resp, outcome)
        # A first turn commits (daprd saves its state without the undispatched events and retries; the
        # reference keeps the work queued for the app instead: engine-rules R11.5 REF).
        absent = crossapp.unreachable(routes, inst, serves=eng.dispatcher.serves) if inst.history else None
        if absent is not None:
            # R11.5: daprd cannot invoke the target app's actors, fails the run and retries it whole.
            abandon(eng, inst, f"app '{eng.config.app_name(absent)}' has no connected worker to take the work "
                               "routed to it (engine-rules R11.5); the turn is retried")
            return CompletionOutcome.ABANDONED
        payload = eng.config.payload_limit(inst.app)
        if payload:
            for req in outcome.activities:
                oversize = payload.activity_oversize(req)
                if oversize is not None:
                    eng.table.stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
                    return CompletionOutcome.STALLED
        _apply(eng, inst, turn, outcome, routes)
        return CompletionOutcome.APPLIED


def abandon(eng: Engine, inst: Instance, reason: str, *, refused_answer: bool = False) -> None:
    """R3.13: the turn is redelivered later (backing off), the RPC still answers OK. A refused answer
    stalls the instance after REFUSALS_BEFORE_STALL in a row (R3.14 b), unless it is suspended: its
    worker holds events back until the resume, so refusals are expected then and end with it."""
    eng.counters.abandoned_turns += 1
    inst.retries += 1
    if refused_answer and inst.retries >= REFUSALS_BEFORE_STALL and not inst.suspended:
        log.warning("refused the answer for %s %d times in a row (%s); stalling it", inst.iid, inst.retries, reason)
        eng.incidents.record(Incident(kind=IncidentKind.STALLED_AFTER_REFUSALS, instance=inst.iid,
                                      text=f"refused the answer {inst.retries} times in a row ({reason}); stalled it"))
        eng.table.stall(inst, refusal_stall(reason, refusals=inst.retries))
        inst.retries = 0
        return
    delay_s = 0 if inst.retries == 1 else min(inst.retries - 1, 5)
    inst.retry_at = eng.clock.now_ns() + int(delay_s * 1e9)
    log.warning("abandoned the turn of %s (%s; refusal %d in a row); redelivering in %ss",
                inst.iid, reason, inst.retries, delay_s)
    eng.dispatcher.maybe_queue(inst)


def _apply(eng: Engine, inst: Instance, turn: Turn, out: Decision, routes: crossapp.Routes) -> None:
    """Commit `out` as the instance machine (taskhub_core.machine) says, in one transaction."""
    table = eng.table
    restart = dict(restart_ns=eng.ticker.now(), next_execution_id=uuid.uuid4().hex) if out.continue_as_new else {}
    cmd = machine.Commit(decision=out, consumed=frozenset(turn.consumed), now_ns=eng.clock.now_ns(),
                         cancel_timeouts=not eng.config.late_timeout_timers, **restart)
    _, effects = machine.apply(core_state(inst), cmd)
    tx = Tx()
    for effect in effects:
        _perform(eng, inst, effect, tx, routes)
    try:
        table.commit(tx, inst)
    except errors.StoreFailed:
        restored = table.find(inst.iid)
        if restored is not None:  # redeliver the turn later, not in a tight loop against a full disk
            abandon(eng, restored, "the database refused to commit it")
        raise
    inst.retries = 0  # only now: a refused commit keeps backing off
    if inst.terminal:
        eng.keep_until_retention(inst)
    eng.dispatcher.maybe_queue(inst)
    table.notify(inst.iid)


def _perform(eng: Engine, inst: Instance, effect: machine.Effect, tx: Tx, routes: crossapp.Routes) -> None:
    """Carry out one effect of a committed turn on the engine's records, the store and the queues."""
    table = eng.table
    match effect:
        case machine.Consumed(items=items):
            _remove_inbox(inst, {i.seq for i in items}, tx)
        case machine.TimerCancelled(item=item):
            _remove_inbox(inst, {item.seq}, tx)
        case machine.Recorded(events=events, custom_status=custom):
            inst.custom_status = custom
            for ev in events:
                table.append_history(inst, ev, tx)
            if events:
                inst.last_updated_ns = ts_ns(events[-1].timestamp) or eng.clock.now_ns()
        case machine.ActivityScheduled(request=req):
            app, router = routes.activities.get(req.taskId, (inst.app, None))
            if not _allowed(eng, inst, app, "activity", req.name):
                table.add_inbox(inst, crossapp.denial(child=False, task_id=req.taskId, now=ts(eng.ticker.now()),
                                                      task_execution_id=req.taskExecutionId), tx)
                return
            add_activity(eng, inst, req, tx, app=app, router=router)
        case machine.TimerScheduled(item=item):
            if eng.policy.schedules_timer(inst=inst, fired=item.event):
                table.add_inbox(inst, item.event, tx, visible_at=timer_due_ns(item.event))
        case machine.ChildStarted(child=child):
            app, incoming = routes.children.get(child.parent_task_id, (inst.app, None))
            if not _allowed(eng, inst, app, "workflow", child.start.executionStarted.name):
                if child.detached:
                    # R11.11: a refused detached spawn is dropped; the caller has no task to fail
                    # (dapr master orchestrator/messages/messages.go:194-206).
                    log.warning("detached workflow %s refused by the access policy of app %s", child.iid,
                                eng.config.app_name(app))
                    return
                table.add_inbox(inst, crossapp.denial(child=True, task_id=child.parent_task_id,
                                                      now=ts(eng.ticker.now())), tx)
                return
            start_child(eng, inst, child.iid, child.start, child.parent_task_id, tx, detached=child.detached,
                        app=app, incoming=incoming)
        case machine.MessageSent(target=target_id, event=ev):
            target = table.find(target_id)
            if target is None or target.terminal:
                log.info("dropped a message from %s to %s: no such running instance", inst.iid, target_id)
                return
            table.add_inbox(target, ev, tx)
            eng.dispatcher.maybe_queue(target)
        case machine.GenerationStarted():
            if routes.generation_router is not None:
                effect.start.router.CopyFrom(routes.generation_router)  # applier.go:88-118
            inst.incoming = routes.next_incoming
            _continue_as_new(eng, inst, effect, tx)
        case machine.Finished():
            _finish(eng, inst, tx)
        case machine.Cascaded(output=output):
            cascade_terminate(eng, inst, output, tx)


def _allowed(eng: Engine, inst: Instance, target: str, kind: str, name: str) -> bool:
    cfg = eng.config
    return cfg.allows(caller=cfg.app_name(inst.app), target=cfg.app_name(target), kind=kind, name=name)


def _remove_inbox(inst: Instance, seqs: set[int], tx: Tx) -> None:
    for entry in [e for e in inst.inbox if e.seq in seqs]:
        inst.inbox.remove(entry)
        tx.inbox_delete.append((inst.iid, entry.seq))


def add_activity(eng: Engine, inst: Instance, req: pb.ActivityRequest, tx: Tx, *, app: str | None = None,
                 router: pb.TaskRouter | None = None) -> None:
    act = PendingActivity(task_id=req.taskId, gen=inst.generation, request=req,
                          app=inst.app if app is None else app, router=router)
    inst.activities[req.taskId] = act
    tx.activity_put.append((inst.iid, req.taskId, inst.generation, wire(req)))
    eng.dispatcher.queue_activity(inst, act)


def start_child(eng: Engine, parent: Instance, child_id: str, start: pb.HistoryEvent, task_id: int, tx: Tx,
                *, detached: bool = False, app: str | None = None, incoming: bytes | None = None) -> None:
    table = eng.table
    existing = table.find(child_id)
    parent_ref = None if detached else ParentRef(iid=parent.iid, task_id=task_id, name=parent.name,
                                                 exec_id=parent.execution_id, app=parent.app)
    if existing is not None:
        # The same create again means the same parent execution: a later generation that
        # reuses the action id (and so the default child id) creates the child afresh.
        owner = existing.parent
        same_owner = (owner is not None and owner.iid == parent.iid and owner.task_id == task_id
                      and (not owner.exec_id or owner.exec_id == parent.execution_id))
        if same_owner and not detached:
            return  # idempotent retry of the same create (R3.5 DAPR)
        if not existing.terminal:
            if not detached:
                fail = pb.HistoryEvent(eventId=-1, timestamp=ts(eng.ticker.now()))
                fail.childWorkflowInstanceFailed.taskScheduledId = task_id
                fd = fail.childWorkflowInstanceFailed.failureDetails
                fd.errorType = "WorkflowInstanceAlreadyExists"
                fd.errorMessage = f"an active workflow with ID '{child_id}' already exists"  # daprd's text
                table.add_inbox(parent, fail, tx)
            return
        table.forget(existing, tx)
    es = start.executionStarted
    now = ts_ns(start.timestamp)
    child = Instance(iid=child_id, seq=table.next_seq(tx), name=es.name,
                     generation=(existing.generation + 1) if existing is not None else 0,
                     execution_id=es.workflowInstance.executionId.value, created_ns=now,
                     last_updated_ns=now, parent=parent_ref, app=parent.app if app is None else app,
                     incoming=incoming)
    table.put(child)
    visible = 0
    if detached and es.HasField("scheduledStartTimestamp"):
        visible = min(max(0, ts_ns(es.scheduledStartTimestamp)), NEVER_NS)
    table.add_inbox(child, start, tx, visible_at=visible)
    tx.instances[child_id] = child.meta()
    eng.dispatcher.maybe_queue(child)
    table.notify(child_id)


def _continue_as_new(eng: Engine, inst: Instance, started: machine.GenerationStarted, tx: Tx) -> None:
    """R2.10 / R3.10: a new generation; old timers and activities are forgotten."""
    tx.history_clear.add(inst.iid)
    for task_id in list(inst.activities):
        tx.activity_delete.append((inst.iid, task_id))
    inst.activities.clear()
    inst.history = []
    inst.started = False
    inst.completed = None
    inst.suspended = False
    inst.resolved = set()
    inst.opened = fresh_opened()
    inst.timer_event_names = {}
    inst.children = []
    inst.patches = []
    inst.generation += 1
    inst.continuing = True
    es = started.start.executionStarted
    inst.execution_id = es.workflowInstance.executionId.value
    inst.created_ns = ts_ns(started.start.timestamp)
    # The core's order over this engine's own entries (a turn may have added some meanwhile).
    order = next_generation(started.start, started.carry, inst.inbox)
    _remove_inbox(inst, {e.seq for e in inst.inbox}, tx)
    for ev, visible_at in order:
        eng.table.add_inbox(inst, ev, tx, visible_at=visible_at)


def _finish(eng: Engine, inst: Instance, tx: Tx) -> None:
    """Terminal: drop timers and pending activities (R6.2 DAPR) and tell the parent (R3.6)."""
    _remove_inbox(inst, {e.seq for e in without_timers(inst.inbox)[1]}, tx)
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
    ev = child_result(inst.completed.executionCompleted, task_id=ref.task_id, now_ns=eng.ticker.now())
    router = crossapp.completion_router(eng.config, inst, parent)
    if router is not None:
        ev.router.CopyFrom(router)
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
