"""Workers' answers: an activity's result, a turn's actions, and what committing a turn sets off.

A completion is checked against what is out (its completion token), then turned into history and new work:
activities, timers, child instances, messages to other instances, continue-as-new, the parent's
notice when an instance finishes. Every completion is answered OK on the wire; the outcome says
what the engine did with it.
"""

from __future__ import annotations

import logging
import uuid

from taskhub_core import machine
from taskhub_core.actions import child_result
from taskhub_core.history import fresh_opened
from taskhub_core.inbox import timer_due_ns, without_timers
from taskhub_core.incidents import Incident, IncidentKind
from taskhub_core.patches import REFUSALS_BEFORE_STALL, refusal_stall
from taskhub_core.turn import Decision, TurnKind, abandon as abandoned
from taskhub_wire import pb

from fake_sidecar.engine import crossapp, errors
from fake_sidecar.engine.model import CompletionOutcome, InboxEntry, Instance, Turn, WorkRef, ts, ts_ns
from fake_sidecar.engine.store import Tx
from fake_sidecar.engine.turns import core_state
from fake_sidecar.engine.work import Work

log = logging.getLogger("fake_sidecar.engine")


def _remove_inbox(inst: Instance, seqs: set[int], tx: Tx) -> None:
    for entry in [e for e in inst.inbox if e.seq in seqs]:
        inst.inbox.remove(entry)
        tx.inbox_delete.append((inst.iid, entry.seq))


class Completions(Work):
    """Workers' answers applied to the engine's state (core.py's `Engine` is one)."""

    def complete_activity(self, resp: pb.ActivityResponse) -> CompletionOutcome:
        with self.lock:
            self.check_open()
            inst = self.table.find(resp.instanceId)
            act = inst.activities.get(resp.taskId) if inst is not None else None
            if inst is None or act is None:
                self.counters.unknown_activity += 1
                log.info("ignored CompleteActivityTask for %s/%s: no pending dispatch", resp.instanceId, resp.taskId)
                self.incidents.record(Incident(
                    kind=IncidentKind.NO_PENDING, instance=resp.instanceId,
                    text=f"CompleteActivityTask for task {resp.taskId}: no pending dispatch"))
                if inst is not None and self.policy.applies_unmatched_activity(inst=inst, resp=resp):
                    self._queue_result(inst, self._result_event(resp, task_execution_id=""))
                    return CompletionOutcome.APPLIED
                return CompletionOutcome.UNKNOWN
            if not self.dispatcher.token_ok(act.token, resp.completionToken):
                self.counters.zombie_activity += 1
                self.dispatcher.log_refused_token(f"CompleteActivityTask for {resp.instanceId}/{resp.taskId}",
                                                  resp.completionToken, instance=resp.instanceId)
                return CompletionOutcome.STALE
            ev = self._result_event(resp, task_execution_id=act.request.taskExecutionId)
            if act.router is not None:
                # R11.3: the result carries its TaskScheduled's router (executor.go:224-251)
                ev.router.CopyFrom(act.router)
            self.dispatcher.settled(WorkRef.activity(inst.iid, resp.taskId), act.stream)
            del inst.activities[resp.taskId]
            self._queue_result(inst, ev, delete_activity=resp.taskId)
            return CompletionOutcome.APPLIED

    def _result_event(self, resp: pb.ActivityResponse, *, task_execution_id: str) -> pb.HistoryEvent:
        """TaskCompleted or TaskFailed for `resp`, carrying the execution id of the attempt it answers."""
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.ticker.now()))
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

    def _queue_result(self, inst: Instance, ev: pb.HistoryEvent, *, delete_activity: int | None = None) -> None:
        tx = Tx()
        if delete_activity is not None:
            tx.activity_delete.append((inst.iid, delete_activity))
        self.table.add_inbox(inst, ev, tx)
        self.table.commit(tx)
        self.dispatcher.maybe_queue(inst)

    def complete_turn(self, resp: pb.WorkflowResponse) -> CompletionOutcome:
        with self.lock:
            self.check_open()
            if self.vectors is not None and self.vectors.claim_answer(resp):
                return CompletionOutcome.VECTOR
            inst = self.table.find(resp.instanceId)
            if inst is None or inst.turn is None:
                self.counters.unknown_turn += 1
                log.info("ignored CompleteWorkflowTask for %s: no turn in flight", resp.instanceId)
                self.incidents.record(Incident(kind=IncidentKind.NO_PENDING, instance=resp.instanceId,
                                               text="CompleteWorkflowTask: no turn in flight"))
                return CompletionOutcome.UNKNOWN
            turn = inst.turn
            if not self.dispatcher.token_ok(turn.token, resp.completionToken):
                self.counters.zombie_turn += 1
                self.dispatcher.log_refused_token(f"CompleteWorkflowTask for {resp.instanceId}", resp.completionToken,
                                                  instance=resp.instanceId)
                return CompletionOutcome.STALE
            inst.turn = None
            self.dispatcher.settled(WorkRef.turn(inst.iid), turn.stream)
            try:
                outcome = self.policy.decide_turn(inst=inst, new_events=turn.new_events, resp=resp,
                                                  now_ns=self.ticker.now())
            except Exception as exc:  # noqa: BLE001 - a bad answer must never lose the turn
                log.exception("could not apply the answer for %s", inst.iid)
                outcome = abandoned(f"the answer could not be applied: {exc!r}")
            if outcome.kind is TurnKind.ABANDON:
                kind = (IncidentKind.STALE_ANSWER if outcome.stale is not None else IncidentKind.MALFORMED_ANSWER
                        if outcome.malformed else IncidentKind.ANSWER_NOT_APPLIED)
                self.incidents.record(Incident(
                    kind=kind, instance=inst.iid, action=outcome.stale,
                    text=f"refused the answer ({outcome.reason}); the turn is delivered again"))
                self.abandon(inst, outcome.reason, refused_answer=True)
                return CompletionOutcome.ABANDONED
            if outcome.kind is TurnKind.STALL:
                assert outcome.stall is not None
                self.table.stall(inst, outcome.stall)
                return CompletionOutcome.STALLED
            routes = crossapp.prepare(self.config, inst, resp, outcome)
            # A first turn commits (daprd saves its state without the undispatched events and retries; the
            # reference keeps the work queued for the app instead: engine-rules R11.5 REF).
            absent = crossapp.unreachable(routes, inst, serves=self.dispatcher.serves) if inst.history else None
            if absent is not None:
                # R11.5: daprd cannot invoke the target app's actors, fails the run and retries it whole.
                self.abandon(inst, f"app '{self.config.app_name(absent)}' has no connected worker to take the work "
                                   "routed to it (engine-rules R11.5); the turn is retried")
                return CompletionOutcome.ABANDONED
            payload = self.config.payload_limit(inst.app)
            if payload:
                for req in outcome.activities:
                    oversize = payload.activity_oversize(req)
                    if oversize is not None:
                        self.table.stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
                        return CompletionOutcome.STALLED
            self._apply(inst, turn, outcome, routes)
            return CompletionOutcome.APPLIED

    def abandon(self, inst: Instance, reason: str, *, refused_answer: bool = False) -> None:
        """R3.13: the turn is redelivered later (backing off), the RPC still answers OK. A refused answer
        stalls the instance after REFUSALS_BEFORE_STALL in a row (R3.14 b), unless it is suspended: its
        worker holds events back until the resume, so refusals are expected then and end with it."""
        self.counters.abandoned_turns += 1
        inst.retries += 1
        if refused_answer and inst.retries >= REFUSALS_BEFORE_STALL and not inst.suspended:
            log.warning("refused the answer for %s %d times in a row (%s); stalling it", inst.iid, inst.retries, reason)
            self.incidents.record(Incident(
                kind=IncidentKind.STALLED_AFTER_REFUSALS, instance=inst.iid,
                text=f"refused the answer {inst.retries} times in a row ({reason}); stalled it"))
            self.table.stall(inst, refusal_stall(reason, refusals=inst.retries))
            inst.retries = 0
            return
        delay_s = 0 if inst.retries == 1 else min(inst.retries - 1, 5)
        inst.retry_at = self.clock.now_ns() + int(delay_s * 1e9)
        log.warning("abandoned the turn of %s (%s; refusal %d in a row); redelivering in %ss",
                    inst.iid, reason, inst.retries, delay_s)
        self.dispatcher.maybe_queue(inst)

    def _apply(self, inst: Instance, turn: Turn, out: Decision, routes: crossapp.Routes) -> None:
        """Commit `out` as the instance machine (taskhub_core.machine) says, in one transaction."""
        table = self.table
        restart = dict(restart_ns=self.ticker.now(), next_execution_id=uuid.uuid4().hex) if out.continue_as_new else {}
        cmd = machine.Commit(decision=out, consumed=frozenset(turn.consumed), now_ns=self.clock.now_ns(),
                             cancel_timeouts=not self.config.late_timeout_timers, **restart)
        _, effects = machine.apply(core_state(inst), cmd)
        tx = Tx()
        for effect in effects:
            self._perform(inst, effect, tx, routes)
        try:
            table.commit(tx, inst)
        except errors.StoreFailed:
            restored = table.find(inst.iid)
            if restored is not None:  # redeliver the turn later, not in a tight loop against a full disk
                self.abandon(restored, "the database refused to commit it")
            raise
        inst.retries = 0  # only now: a refused commit keeps backing off
        if inst.terminal:
            self.keep_until_retention(inst)
        self.dispatcher.maybe_queue(inst)
        table.notify(inst.iid)

    def _perform(self, inst: Instance, effect: machine.Effect, tx: Tx, routes: crossapp.Routes) -> None:
        """Carry out one effect of a committed turn on the engine's records, the store and the queues."""
        table = self.table
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
                    inst.last_updated_ns = ts_ns(events[-1].timestamp) or self.clock.now_ns()
            case machine.ActivityScheduled(request=req):
                app, router = routes.activities.get(req.taskId, (inst.app, None))
                if not self._allowed(inst, app, "activity", req.name):
                    table.add_inbox(inst, crossapp.denial(child=False, task_id=req.taskId, now=ts(self.ticker.now()),
                                                          task_execution_id=req.taskExecutionId), tx)
                    return
                self.add_activity(inst, req, tx, app=app, router=router)
            case machine.TimerScheduled(item=item):
                if self.policy.schedules_timer(inst=inst, fired=item.event):
                    table.add_inbox(inst, item.event, tx, visible_at=timer_due_ns(item.event))
            case machine.ChildStarted(child=child):
                app, incoming = routes.children.get(child.parent_task_id, (inst.app, None))
                if not self._allowed(inst, app, "workflow", child.start.executionStarted.name):
                    if child.detached:
                        # R11.11: a refused detached spawn is dropped; the caller has no task to fail
                        # (dapr master orchestrator/messages/messages.go:194-206).
                        log.warning("detached workflow %s refused by the access policy of app %s", child.iid,
                                    self.config.app_name(app))
                        return
                    table.add_inbox(inst, crossapp.denial(child=True, task_id=child.parent_task_id,
                                                          now=ts(self.ticker.now())), tx)
                    return
                self.start_child(inst, child.iid, child.start, child.parent_task_id, tx, detached=child.detached,
                                 app=app, incoming=incoming)
            case machine.MessageSent(target=target_id, event=ev):
                target = table.find(target_id)
                if target is None or target.terminal:
                    log.info("dropped a message from %s to %s: no such running instance", inst.iid, target_id)
                    return
                table.add_inbox(target, ev, tx)
                self.dispatcher.maybe_queue(target)
            case machine.GenerationStarted():
                if routes.generation_router is not None:
                    effect.start.router.CopyFrom(routes.generation_router)  # applier.go:88-118
                inst.incoming = routes.next_incoming
                self._continue_as_new(inst, effect, tx)
            case machine.Finished(kept=kept):
                self._finish(inst, tx, kept=frozenset(kept))
            case machine.Cascaded(output=output):
                self.cascade_terminate(inst, output, tx)

    def _allowed(self, inst: Instance, target: str, kind: str, name: str) -> bool:
        cfg = self.config
        return cfg.allows(caller=cfg.app_name(inst.app), target=cfg.app_name(target), kind=kind, name=name)

    def _continue_as_new(self, inst: Instance, started: machine.GenerationStarted, tx: Tx) -> None:
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
        order = self.policy.next_generation(inst=inst, start=started.start, carry=started.carry)
        _remove_inbox(inst, {e.seq for e in inst.inbox}, tx)
        for ev, visible_at in order:
            self.table.add_inbox(inst, ev, tx, visible_at=visible_at)

    def _finish(self, inst: Instance, tx: Tx, *, kept: frozenset[int] = frozenset()) -> None:
        """Terminal: drop timers and the activities of earlier turns (R6.2 DAPR) and tell the parent
        (R3.6). The ending turn's own activities (`kept`) are still dispatched, as both engines do
        (R4.1: daprd run.go:341,409 dispatches the pending tasks whether or not the turn completed)."""
        _remove_inbox(inst, {e.seq for e in without_timers(inst.inbox)[1]}, tx)
        for task_id in [t for t in inst.activities if t not in kept]:
            tx.activity_delete.append((inst.iid, task_id))
            del inst.activities[task_id]
        ref = inst.parent
        if ref is None:
            return
        parent = self.table.find(ref.iid)
        if parent is None or parent.terminal or parent.execution_id != ref.exec_id:
            return
        assert inst.completed is not None
        ev = child_result(inst.completed.executionCompleted, task_id=ref.task_id, now_ns=self.ticker.now())
        router = crossapp.completion_router(self.config, inst, parent)
        if router is not None:
            ev.router.CopyFrom(router)
        self.table.add_inbox(parent, ev, tx)
        tx.instances[parent.iid] = parent.meta()
        self.dispatcher.maybe_queue(parent)

    def drop_for_terminal(self, inst: Instance, visible: list[InboxEntry]) -> None:
        """R3.17: events for a finished instance are consumed and discarded (a recursive terminate still cascades)."""
        tx = Tx()
        for entry in visible:
            inst.inbox.remove(entry)
            tx.inbox_delete.append((inst.iid, entry.seq))
            et = entry.event.executionTerminated if entry.event.HasField("executionTerminated") else None
            if et is not None and et.recurse:
                self.cascade_terminate(inst, et.input.value if et.HasField("input") else None, tx)
        self.table.commit(tx)
