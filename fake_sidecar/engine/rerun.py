"""RerunWorkflowFromEvent (R8.3): a new instance from a finished one's history up to an event.

Resolved operations before the target are copied; operations still open there, and the target
itself, are issued again, so their results drive the new instance's first turn.
"""

from __future__ import annotations

import uuid

from taskhub_core.actions import Context, child_instance_id, child_start, timer_fired
from taskhub_core.history import resolution_key
from taskhub_core.inbox import timer_due_ns
from taskhub_wire import pb
from taskhub_wire.kinds import OPENING_FIELDS, PRODUCED_FIELDS, EventKind

from fake_sidecar.engine import crossapp, errors
from fake_sidecar.engine.management import validate_instance_id
from fake_sidecar.engine.model import Instance, wire
from fake_sidecar.engine.store import Tx
from fake_sidecar.engine.work import Work

_RERUNNABLE = OPENING_FIELDS  # the events that open an operation can be rerun from


class Rerun(Work):
    """RerunWorkflowFromEvent over the engine's state (core.py's `Engine` is one)."""

    def rerun(self, *, source: str, event_id: int, new_iid: str | None, input: str | None,
              overwrite_input: bool, new_child_iid: str | None) -> str:
        if not source:
            raise errors.InvalidArgument("RerunWorkflowFromEvent needs sourceInstanceID")
        new_id = new_iid or uuid.uuid4().hex
        if new_id == source:
            raise errors.InvalidArgument(
                "rerun workflow instance ID must be different from the original instance ID")
        validate_instance_id(new_id)
        with self.lock:
            self.check_open()
            src = self.table.find(source)
            if src is None:
                raise errors.NotFound(f"workflow instance does not exist with ID '{source}'")
            if not src.terminal:
                raise errors.InvalidArgument(f"'{source}' is not in a terminal state")
            if src.parent is not None:
                raise errors.InvalidArgument(f"'{source}': cannot rerun from child-workflows")
            idx = next((i for i, e in enumerate(src.history) if e.eventId == event_id
                        and e.WhichOneof("eventType") in PRODUCED_FIELDS), None)
            if idx is None:
                raise errors.NotFound(f"'{source}' does not have history event with ID '{event_id}'")
            target = src.history[idx]
            kind = target.WhichOneof("eventType")
            if kind == EventKind.DETACHED_WORKFLOW_INSTANCE_CREATED.field:
                raise errors.InvalidArgument(f"cannot rerun from detached workflow creation event '{event_id}'")
            if kind not in _RERUNNABLE:
                raise errors.NotFound(
                    f"target event '{kind}' with ID '{event_id}' is not an event that can be rerun")
            if overwrite_input and kind == EventKind.TIMER_CREATED.field:
                raise errors.InvalidArgument(f"cannot write input to timer event '{event_id}'")
            if new_child_iid and kind != EventKind.CHILD_WORKFLOW_INSTANCE_CREATED.field:
                raise errors.InvalidArgument(
                    "newChildWorkflowInstanceID can only be set when rerunning from a child workflow event")
            if new_id in self.table:
                raise errors.AlreadyExists(f"workflow '{new_id}' has already been created")
            self._rerun(src, idx, new_id=new_id, input=input, overwrite=overwrite_input, new_child=new_child_iid)
        return new_id

    def _rerun(self, src: Instance, idx: int, *, new_id: str, input: str | None, overwrite: bool,
               new_child: str | None) -> None:
        """R8.3: copy resolved pairs before the target, then re-issue open operations and the target."""
        prefix = src.history[:idx]
        resolved: set[tuple[str, int]] = set()
        for ev in prefix:
            key = resolution_key(ev)
            if key is not None:
                resolved.add(key)
        copied: list[pb.HistoryEvent] = []
        reissue: list[pb.HistoryEvent] = []
        for ev in prefix:
            field = ev.WhichOneof("eventType")
            group = EventKind.from_field(field).opens if field in OPENING_FIELDS else None
            if group is not None and (group, ev.eventId) not in resolved:
                reissue.append(ev)
                continue
            copied.append(ev)
        target = pb.HistoryEvent()
        target.CopyFrom(src.history[idx])
        body = getattr(target, target.WhichOneof("eventType"))
        body.rerunParentInstanceInfo.instanceID = src.iid
        if overwrite:
            body.ClearField("input")
            if input is not None:
                body.input.value = input
        if new_child and target.HasField("childWorkflowInstanceCreated"):
            target.childWorkflowInstanceCreated.instanceId = new_child
        reissue.append(target)
        table = self.table
        tx = Tx()
        now = self.ticker.now()
        start = next(e for e in copied if e.HasField("executionStarted"))
        inst = Instance(iid=new_id, seq=table.next_seq(tx), name=start.executionStarted.name, generation=0,
                        execution_id=start.executionStarted.workflowInstance.executionId.value,
                        created_ns=now, last_updated_ns=now, app=src.app, incoming=src.incoming)
        for ev in copied:  # resolved pairs and the rest verbatim (fork.go:158-161)
            kept = pb.HistoryEvent()
            kept.CopyFrom(ev)
            table.append_history(inst, kept, tx)
        for ev in reissue:
            new_ev = pb.HistoryEvent()
            new_ev.CopyFrom(ev)
            # R8.3/R8.5: a child created again (an open one, or the target without a new id) is named after
            # the new instance (fork.go:117-121, :208-212).
            if new_ev.HasField("childWorkflowInstanceCreated") and not (ev is target and new_child):
                new_ev.childWorkflowInstanceCreated.instanceId = child_instance_id(new_id, ev.eventId)
            table.append_history(inst, new_ev, tx)
        table.put(inst)
        for ev in inst.history[len(copied):]:
            self._reissue(inst, ev, tx)
        # A turn is needed so the workflow resumes; an empty WorkflowStarted-only turn is not allowed
        # by SDKs, so the re-issued operations' results drive it. A rerun with nothing open: none.
        table.commit(tx, inst)
        self.dispatcher.maybe_queue(inst)
        table.notify(new_id)

    def _outgoing(self, inst: Instance, scope: int) -> pb.PropagatedHistory | None:
        """daprd's rerun.go:172-183 (buildRerunOutgoingHistory): a re-driven call keeps the scope its event
        recorded, and its chunk is the rerun instance's whole history so far (every re-driven event
        included), after the lineage the instance received."""
        if scope == pb.HISTORY_PROPAGATION_SCOPE_NONE:
            return None
        received = None if inst.incoming is None else pb.PropagatedHistory.FromString(inst.incoming)
        return crossapp.assemble(scope=scope, received=received, own=list(inst.history),
                                 app=self.config.app_name(inst.app), iid=inst.iid)

    def _route(self, inst: Instance, ev: pb.HistoryEvent) -> tuple[str | None, pb.TaskRouter | None]:
        """A re-driven call goes to the app its event's router names (R11.2), as the first one did."""
        if not self.config.apps or not ev.HasField("router"):
            return None, None
        return crossapp.target_key(self.config, inst, ev.router), ev.router

    def _reissue(self, inst: Instance, ev: pb.HistoryEvent, tx: Tx) -> None:
        app, router = self._route(inst, ev)
        if ev.HasField("taskScheduled"):
            st = ev.taskScheduled
            req = pb.ActivityRequest(name=st.name, taskId=ev.eventId, taskExecutionId=st.taskExecutionId)
            if st.HasField("input"):
                req.input.CopyFrom(st.input)
            req.workflowInstance.instanceId = inst.iid
            ph = self._outgoing(inst, st.historyPropagationScope)
            if ph is not None:
                req.propagatedHistory.CopyFrom(ph)
            self.add_activity(inst, req, tx, app=app, router=router)
        elif ev.HasField("timerCreated"):
            fired = timer_fired(timer_id=ev.eventId, fire_at=ev.timerCreated.fireAt)
            self.table.add_inbox(inst, fired, tx, visible_at=timer_due_ns(fired))
        elif ev.HasField("childWorkflowInstanceCreated"):
            ce = ev.childWorkflowInstanceCreated
            ctx = Context(iid=inst.iid, name=inst.name, execution_id=inst.execution_id, now_ns=self.ticker.now(),
                          new_id=lambda: uuid.uuid4().hex)
            start = child_start(child_id=ce.instanceId, name=ce.name, input=ce.input if ce.HasField("input") else None,
                                parent_task_id=ev.eventId, ctx=ctx)
            if app is not None:
                start.router.CopyFrom(router)
                start.executionStarted.parentInstance.appID = self.config.app_name(inst.app)
            ph = self._outgoing(inst, ce.historyPropagationScope)
            self.start_child(inst, ce.instanceId, start, ev.eventId, tx, app=app,
                             incoming=None if ph is None else wire(ph))
