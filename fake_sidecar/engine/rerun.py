"""RerunWorkflowFromEvent (R8.3): a new instance from a finished one's history up to an event.

Resolved operations before the target are copied; operations still open there, and the target
itself, are issued again, so their results drive the new instance's first turn.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.completions import add_activity, start_child
from fake_sidecar.engine.management import validate_instance_id
from fake_sidecar.engine.model import NEVER_NS, Instance, ts, ts_ns
from fake_sidecar.engine.store import Tx
from fake_sidecar.engine.turns import resolution_key

if TYPE_CHECKING:
    from fake_sidecar.engine.core import Engine

_RERUNNABLE = {"taskScheduled", "timerCreated", "childWorkflowInstanceCreated"}
# The event kind of an operation -> the kind of its resolution key (turns.resolution_key).
_OPERATION_GROUP = {"taskScheduled": "task", "timerCreated": "timer", "childWorkflowInstanceCreated": "child"}


def rerun(eng: Engine, *, source: str, event_id: int, new_iid: str | None, input: str | None,
          overwrite_input: bool, new_child_iid: str | None) -> str:
    if not source:
        raise errors.InvalidArgument("RerunWorkflowFromEvent needs sourceInstanceID")
    new_id = new_iid or uuid.uuid4().hex
    if new_id == source:
        raise errors.InvalidArgument(
            "rerun workflow instance ID must be different from the original instance ID")
    validate_instance_id(new_id)
    with eng.lock:
        eng.check_open()
        src = eng.table.find(source)
        if src is None:
            raise errors.NotFound(f"workflow instance does not exist with ID '{source}'")
        if not src.terminal:
            raise errors.InvalidArgument(f"'{source}' is not in a terminal state")
        if src.parent is not None:
            raise errors.InvalidArgument(f"'{source}': cannot rerun from child-workflows")
        idx = next((i for i, e in enumerate(src.history) if e.eventId == event_id
                    and e.WhichOneof("eventType") in _RERUNNABLE | {"detachedWorkflowInstanceCreated",
                                                                      "executionCompleted", "eventSent"}), None)
        if idx is None:
            raise errors.NotFound(f"'{source}' does not have history event with ID '{event_id}'")
        target = src.history[idx]
        kind = target.WhichOneof("eventType")
        if kind == "detachedWorkflowInstanceCreated":
            raise errors.InvalidArgument(f"cannot rerun from detached workflow creation event '{event_id}'")
        if kind not in _RERUNNABLE:
            raise errors.NotFound(
                f"target event '{kind}' with ID '{event_id}' is not an event that can be rerun")
        if overwrite_input and kind == "timerCreated":
            raise errors.InvalidArgument(f"cannot write input to timer event '{event_id}'")
        if new_child_iid and kind != "childWorkflowInstanceCreated":
            raise errors.InvalidArgument(
                "newChildWorkflowInstanceID can only be set when rerunning from a child workflow event")
        if new_id in eng.table:
            raise errors.AlreadyExists(f"workflow '{new_id}' has already been created")
        _rerun(eng, src, idx, new_id=new_id, input=input, overwrite=overwrite_input, new_child=new_child_iid)
    return new_id


def _rerun(eng: Engine, src: Instance, idx: int, *, new_id: str, input: str | None, overwrite: bool,
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
        group = _OPERATION_GROUP.get(ev.WhichOneof("eventType"))
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
    table = eng.table
    tx = Tx()
    now = eng.ticker.now()
    start = next(e for e in copied if e.HasField("executionStarted"))
    inst = Instance(iid=new_id, seq=table.next_seq(tx), name=start.executionStarted.name, generation=0,
                    execution_id=start.executionStarted.workflowInstance.executionId.value,
                    created_ns=now, last_updated_ns=now)
    for ev in copied + reissue:
        new_ev = pb.HistoryEvent()
        new_ev.CopyFrom(ev)
        if new_ev.HasField("childWorkflowInstanceCreated") and ev is not target:
            new_ev.childWorkflowInstanceCreated.instanceId = f"{new_id}:{ev.eventId & 0xFFFF:04x}"
        table.append_history(inst, new_ev, tx)
    table.put(inst)
    for ev in inst.history[len(copied):]:
        _reissue(eng, inst, ev, tx)
    # A turn is needed so the workflow resumes; an empty WorkflowStarted-only turn is not allowed
    # by SDKs, so the re-issued operations' results drive it. A rerun with nothing open: none.
    table.commit(tx, inst)
    eng.dispatcher.maybe_queue(inst)
    table.notify(new_id)


def _reissue(eng: Engine, inst: Instance, ev: pb.HistoryEvent, tx: Tx) -> None:
    if ev.HasField("taskScheduled"):
        st = ev.taskScheduled
        req = pb.ActivityRequest(name=st.name, taskId=ev.eventId, taskExecutionId=st.taskExecutionId)
        if st.HasField("input"):
            req.input.CopyFrom(st.input)
        req.workflowInstance.instanceId = inst.iid
        add_activity(eng, inst, req, tx)
    elif ev.HasField("timerCreated"):
        fired = pb.HistoryEvent(eventId=-1)
        fired.timerFired.timerId = ev.eventId
        fired.timerFired.fireAt.CopyFrom(ev.timerCreated.fireAt)
        eng.table.add_inbox(inst, fired, tx, visible_at=min(ts_ns(ev.timerCreated.fireAt), NEVER_NS))
    elif ev.HasField("childWorkflowInstanceCreated"):
        ce = ev.childWorkflowInstanceCreated
        start = pb.HistoryEvent(eventId=-1, timestamp=ts(eng.ticker.now()))
        es = start.executionStarted
        es.name = ce.name
        if ce.HasField("input"):
            es.input.CopyFrom(ce.input)
        es.workflowInstance.instanceId = ce.instanceId
        es.workflowInstance.executionId.value = uuid.uuid4().hex
        es.parentInstance.taskScheduledId = ev.eventId
        es.parentInstance.name.value = inst.name
        es.parentInstance.workflowInstance.instanceId = inst.iid
        es.parentInstance.workflowInstance.executionId.value = inst.execution_id
        start_child(eng, inst, ce.instanceId, start, ev.eventId, tx)
