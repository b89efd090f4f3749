"""What an operation sets off inside its transaction: an activity to dispatch, a child instance, a
termination (and its cascade to the children).

The management API (terminate), the completions (a turn's actions, a recursive terminate) and rerun
(the operations it issues again) all start work this way, so it sits below the three of them.
"""

from __future__ import annotations

from taskhub_wire import pb

from fake_sidecar.engine.model import NEVER_NS, Instance, ParentRef, PendingActivity, ts, ts_ns, wire
from fake_sidecar.engine.state import EngineState
from fake_sidecar.engine.store import Tx


class Work(EngineState):
    def add_activity(self, inst: Instance, req: pb.ActivityRequest, tx: Tx, *, app: str | None = None,
                     router: pb.TaskRouter | None = None) -> None:
        act = PendingActivity(task_id=req.taskId, gen=inst.generation, request=req,
                              app=inst.app if app is None else app, router=router)
        inst.activities[req.taskId] = act
        tx.activity_put.append((inst.iid, req.taskId, inst.generation, wire(req)))
        self.dispatcher.queue_activity(inst, act)

    def start_child(self, parent: Instance, child_id: str, start: pb.HistoryEvent, task_id: int, tx: Tx,
                    *, detached: bool = False, app: str | None = None, incoming: bytes | None = None) -> None:
        table = self.table
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
                    fail = pb.HistoryEvent(eventId=-1, timestamp=ts(self.ticker.now()))
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
        self.dispatcher.maybe_queue(child)
        table.notify(child_id)

    def enqueue_terminate(self, inst: Instance, *, output: str | None, recurse: bool,
                          tx: Tx | None = None) -> None:
        """Queue ExecutionTerminated; written in `tx` if given (a cascade commits with its cause)."""
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.ticker.now()))
        if output is not None:
            ev.executionTerminated.input.value = output
        ev.executionTerminated.recurse = recurse
        own = tx is None
        tx = Tx() if tx is None else tx
        # A not-yet-due scheduled start becomes due: the termination needs a turn to take effect.
        for entry in inst.inbox:
            if entry.event.HasField("executionStarted") and entry.visible_at:
                entry.visible_at = 0
                tx.inbox_add.append((inst.iid, entry.seq, 0, entry.gen, wire(entry.event)))
        self.table.add_inbox(inst, ev, tx)
        if own:
            self.table.commit(tx)
        self.dispatcher.maybe_queue(inst)

    def cascade_terminate(self, inst: Instance, output: str | None, tx: Tx) -> None:
        """A recursive terminate reaches every running child `inst` owns, in the same transaction."""
        for child in self.table.children_of(inst):
            if not child.terminal:
                self.enqueue_terminate(child, output=output, recurse=True, tx=tx)
