"""Stateful history (R5.7) with several streams: a delta is only ever relative to what that stream got.

A stream is remembered with the number of past events it was last sent per instance; that memory
belongs to one execution. After continue-as-new (or a purge and a new start under the same id) the
new execution's history may grow past the old count on another stream, and a delta from it would
splice the old execution's events into the new one (seen with two Go workers on one engine).
"""

from __future__ import annotations

from fake_sidecar.engine import Engine, EngineConfig, VirtualClock
from fake_sidecar.engine.store import MemoryStore
from taskhub_wire import pb


def _engine() -> Engine:
    return Engine(store=MemoryStore(), clock=VirtualClock(), config=EngineConfig())


def _turn(engine: Engine, sid: int) -> pb.WorkItem:
    item = engine.take(sid, timeout=5)
    assert item is not None and item.HasField("workflowRequest"), item
    return item


def _answer(engine: Engine, item: pb.WorkItem, *, continue_as_new: bool = False) -> None:
    resp = pb.WorkflowResponse(instanceId=item.workflowRequest.instanceId, completionToken=item.completionToken)
    if continue_as_new:
        done = resp.actions.add(id=1).completeWorkflow
        done.workflowStatus = pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
        done.result.value = "2"
    assert engine.complete_turn(resp) == "applied"


def _event_turn(engine: Engine, sid: int) -> pb.WorkItem:
    engine.raise_event(iid="i", name="e", input=None)
    return _turn(engine, sid)


def test_a_stream_that_missed_a_new_generation_gets_it_in_full():
    engine = _engine()
    try:
        a, b = engine.open_stream(stateful=True), engine.open_stream(stateful=True)
        engine.start_instance(instance_id="i", name="W", input="1")
        _answer(engine, _turn(engine, a))
        _answer(engine, _event_turn(engine, a))
        third = _event_turn(engine, a)
        assert third.workflowRequest.HasField("cachedHistory")  # a is warm for the first generation
        _answer(engine, third, continue_as_new=True)
        _answer(engine, _turn(engine, b))  # the new generation's first turns go to b only
        for _ in range(4):
            _answer(engine, _event_turn(engine, b))
        back = _event_turn(engine, a)
        req = back.workflowRequest
        assert not req.HasField("cachedHistory"), "a never got this execution: no delta for it"
        assert [e.WhichOneof("eventType") for e in req.pastEvents][:2] == ["workflowStarted", "executionStarted"]
        assert req.pastEvents[1].executionStarted.input.value == "2"
    finally:
        engine.close()


def test_the_stream_that_saw_it_still_gets_deltas():
    engine = _engine()
    try:
        b = engine.open_stream(stateful=True)
        engine.start_instance(instance_id="i", name="W", input="1")
        _answer(engine, _turn(engine, b))
        second = _event_turn(engine, b)
        _answer(engine, second)
        third = _event_turn(engine, b)
        assert third.workflowRequest.cachedHistory.eventCount == len(second.workflowRequest.pastEvents)
    finally:
        engine.close()
