"""A child created again by a later generation of its parent (same action id, so the same default id).

The engine takes a repeated create by the same parent and task id for a retry of one create and
ignores it (R3.5 [DAPR]); a later generation is another execution of the parent, whose create must
start the finished child afresh, or the parent waits for ever (seen with
scenarios/connection/several-workers-share-the-work).
"""

from __future__ import annotations

from fake_sidecar.engine import Engine, EngineConfig, VirtualClock
from fake_sidecar.engine.store import MemoryStore
from taskhub_wire import pb


def _take(engine: Engine, sid: int, iid: str) -> pb.WorkItem:
    item = engine.take(sid, timeout=5)
    assert item is not None and item.workflowRequest.instanceId == iid, item
    return item


def _answer(engine: Engine, item: pb.WorkItem, action: pb.WorkflowAction | None = None) -> None:
    resp = pb.WorkflowResponse(instanceId=item.workflowRequest.instanceId, completionToken=item.completionToken)
    if action is not None:
        resp.actions.append(action)
    assert engine.complete_turn(resp) == "applied"


def _create_child() -> pb.WorkflowAction:
    action = pb.WorkflowAction(id=1)
    action.createChildWorkflow.instanceId = "p:0001"
    action.createChildWorkflow.name = "C"
    return action


def _done(status: int, result: str) -> pb.WorkflowAction:
    action = pb.WorkflowAction(id=2)
    action.completeWorkflow.workflowStatus = status
    action.completeWorkflow.result.value = result
    return action


def test_a_later_generation_creates_its_finished_child_again():
    engine = Engine(store=MemoryStore(), clock=VirtualClock(), config=EngineConfig())
    try:
        sid = engine.open_stream()
        engine.start_instance(instance_id="p", name="P", input="1")
        for generation in ("1", "2"):
            _answer(engine, _take(engine, sid, "p"), _create_child())
            _answer(engine, _take(engine, sid, "p:0001"), _done(pb.ORCHESTRATION_STATUS_COMPLETED, generation))
            back = _take(engine, sid, "p")  # the child's result reaches this generation
            assert back.workflowRequest.newEvents[-1].childWorkflowInstanceCompleted.result.value == generation
            _answer(engine, back, _done(pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW, "2"))
    finally:
        engine.close()
