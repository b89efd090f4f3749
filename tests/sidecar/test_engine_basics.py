"""The engine's history layout, ids, tokens and redelivery, driven by a raw worker (engine-rules.md)."""

from __future__ import annotations

import time

import grpc
import pytest

from taskhub_wire import pb
from tests.sidecar.rawworker import RawWorker, complete, kinds, schedule, timer


def start(client, iid: str, name: str = "W", input: str | None = "1", **kw) -> pb.CreateInstanceRequest:
    req = pb.CreateInstanceRequest(instanceId=iid, name=name, **kw)
    if input is not None:
        req.input.value = input
    return req


def test_t1_activity_then_timer(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    started = background.submit(client.call, "StartInstance", start(client, "w"), timeout=10)
    turn1 = worker.next_workflow()
    req = turn1.workflowRequest
    assert kinds(req.pastEvents) == []
    assert kinds(req.newEvents) == ["WorkflowStarted", "ExecutionStarted"]
    assert req.newEvents[0].eventId == -1 and req.newEvents[1].eventId == -1
    assert req.newEvents[1].executionStarted.input.value == "1"
    assert req.executionId.value == req.newEvents[1].executionStarted.workflowInstance.executionId.value
    worker.answer(turn1, schedule(0, "A", "1", task_execution_id="t0"))
    assert started.result(timeout=10).instanceId == "w"

    act = worker.next_activity()
    ar = act.activityRequest
    assert (ar.name, ar.input.value, ar.taskId, ar.taskExecutionId, ar.workflowInstance.instanceId) == (
        "A", "1", 0, "t0", "w")
    assert act.completionToken
    worker.complete_activity(act, "2")

    turn2 = worker.next_workflow()
    assert kinds(turn2.workflowRequest.pastEvents) == ["WorkflowStarted", "ExecutionStarted", "TaskScheduled"]
    assert kinds(turn2.workflowRequest.newEvents) == ["WorkflowStarted", "TaskCompleted"]
    done = turn2.workflowRequest.newEvents[1].taskCompleted
    assert (done.taskScheduledId, done.result.value, done.taskExecutionId) == (0, "2", "t0")
    worker.answer(turn2, timer(1, time.time_ns() + 200_000_000))

    turn3 = worker.next_workflow()
    fired = turn3.workflowRequest.newEvents[1]
    assert fired.timerFired.timerId == 1
    worker.answer(turn3, complete(2, "2"))

    hist = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="w")).events
    assert kinds(hist) == ["WorkflowStarted", "ExecutionStarted", "TaskScheduled", "WorkflowStarted",
                           "TaskCompleted", "TimerCreated", "WorkflowStarted", "TimerFired", "ExecutionCompleted"]
    assert [e.eventId for e in hist] == [-1, -1, 0, -1, -1, 1, -1, -1, 2]
    state = client.call("GetInstance", pb.GetInstanceRequest(instanceId="w", getInputsAndOutputs=True))
    assert state.exists and state.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED
    assert (state.workflowState.input.value, state.workflowState.output.value) == ("1", "2")
    bare = client.call("GetInstance", pb.GetInstanceRequest(instanceId="w"))
    assert not bare.workflowState.HasField("input") and not bare.workflowState.HasField("output")
    worker.cancel()


def test_zombie_token_ignored_and_redelivery_applied_once(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    fut = background.submit(client.call, "StartInstance", start(client, "z"), timeout=10)
    worker.answer(worker.next_workflow(), schedule(1, "A"))
    fut.result(timeout=10)
    first = worker.next_activity()
    worker.cancel()  # the stream breaks while the activity is in flight

    second_worker = RawWorker(sidecar.address)
    again = second_worker.next_activity()
    assert again.activityRequest.taskId == 1
    assert again.completionToken != first.completionToken
    # The zombie answers with the old token: OK, ignored.
    second_worker.complete_activity(first, "zombie")
    assert sidecar.engine.counters.zombie_activity == 1
    second_worker.complete_activity(again, "real")
    turn = second_worker.next_workflow()
    completions = [e for e in turn.workflowRequest.newEvents if e.HasField("taskCompleted")]
    assert [c.taskCompleted.result.value for c in completions] == ["real"]
    # A duplicate completion after the fact changes nothing.
    second_worker.complete_activity(again, "again")
    second_worker.answer(turn, complete(2, "done"))
    hist = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="z")).events
    assert kinds(hist).count("TaskCompleted") == 1
    second_worker.cancel()


def test_unknown_instance_errors(client):
    with pytest.raises(grpc.RpcError) as err:
        client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="nope"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert not client.call("GetInstance", pb.GetInstanceRequest(instanceId="nope")).exists
    with pytest.raises(grpc.RpcError) as err:
        client.call("RaiseEvent", pb.RaiseEventRequest(instanceId="nope", name="x"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "no such instance" in err.value.details()


def test_injected_vector_reaches_worker_and_is_not_applied(sidecar, client):
    from concurrent.futures import ThreadPoolExecutor

    assert sidecar.engine.vectors is None  # an engine that never injects has no vector channel
    worker = RawWorker(sidecar.address)
    ws = pb.HistoryEvent(eventId=-1)
    ws.workflowStarted.SetInParent()
    es = pb.HistoryEvent(eventId=-1)
    es.executionStarted.name = "W"
    es.executionStarted.workflowInstance.instanceId = "vec-1"
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(sidecar.engine.inject_turn, instance_id="vec-1", past=[], new=[ws, es], timeout=10)
        item = worker.next_workflow()
        assert item.workflowRequest.instanceId == "vec-1"
        worker.answer(item, schedule(1, "A"))
        resp = fut.result(timeout=10)
    assert resp is not None and resp.actions[0].scheduleTask.name == "A"
    assert not client.call("GetInstance", pb.GetInstanceRequest(instanceId="vec-1")).exists
    worker.cancel()


def test_a_second_stop_does_nothing(sidecar):
    """A harness may stop a sidecar its scenario already stopped: the second stop returns quietly (it raised
    "Event loop is closed" once the first had closed the server's loop)."""
    sidecar.stop(grace=0.1)
    sidecar.stop(grace=0.1)  # the fixture stops it a third time
    channel = grpc.insecure_channel(sidecar.address)
    try:
        with pytest.raises(grpc.FutureTimeoutError):  # and it is still stopped
            grpc.channel_ready_future(channel).result(timeout=0.5)
    finally:
        channel.close()
