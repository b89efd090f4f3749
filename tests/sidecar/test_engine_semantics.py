"""Engine semantics beyond the basic trace: stalls, versions, children, CAN, terminate, purge, listing."""

from __future__ import annotations

import time

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from taskhub_core.incidents import IncidentKind
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind
from taskhub_wire.rpc import TaskHubClient
from tests.sidecar.rawworker import RawWorker, child, complete, kinds, schedule, timer


def create(iid: str, name: str = "W", input: str | None = None, **kw) -> pb.CreateInstanceRequest:
    req = pb.CreateInstanceRequest(instanceId=iid, name=name, **kw)
    if input is not None:
        req.input.value = input
    return req


def history(client: TaskHubClient, iid: str) -> list[pb.HistoryEvent]:
    return list(client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid)).events)


def status(client: TaskHubClient, iid: str) -> int:
    return client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid)).workflowState.workflowStatus


def wait_status(client: TaskHubClient, iid: str, want: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if status(client, iid) == want:
            return
        time.sleep(0.02)
    raise AssertionError(f"{iid} never reached {pb.OrchestrationStatus.Name(want)}; "
                         f"it is {pb.OrchestrationStatus.Name(status(client, iid))}")


def begin(worker: RawWorker, client: TaskHubClient, background, iid: str, *first_actions, **answer_kw):
    fut = background.submit(client.call, "StartInstance", create(iid), timeout=10)
    item = worker.next_workflow()
    worker.answer(item, *first_actions, **answer_kw)
    fut.result(timeout=10)
    return item


def raise_event(client, iid, name="go", data=None):
    req = pb.RaiseEventRequest(instanceId=iid, name=name)
    if data is not None:
        req.input.value = data
    client.call("RaiseEvent", req, timeout=5)


def test_patch_mismatch_stalls_and_recovers(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "p", patches=["p1"])  # turn 1 records patch p1, waits for an event
    raise_event(client, "p")
    turn2 = worker.next_workflow()
    ws = [e for e in turn2.workflowRequest.pastEvents if e.HasField("workflowStarted")]
    assert list(ws[0].workflowStarted.version.patches) == ["p1"]
    worker.answer(turn2, complete(1, "x"))  # code without the patch: reports no patches
    wait_status(client, "p", pb.ORCHESTRATION_STATUS_STALLED)
    last = history(client, "p")[-1]
    assert last.executionStalled.reason == pb.PATCH_MISMATCH
    assert last.executionStalled.description == "Patch mismatch. History patches: [p1], current patches: []. "
    # While stalled: management operations are refused with "stalled"; reads work.
    for name, req in [("RaiseEvent", pb.RaiseEventRequest(instanceId="p", name="e")),
                      ("SuspendInstance", pb.SuspendRequest(instanceId="p")),
                      ("ResumeInstance", pb.ResumeRequest(instanceId="p")),
                      ("TerminateInstance", pb.TerminateRequest(instanceId="p")),
                      ("PurgeInstances", pb.PurgeInstancesRequest(instanceId="p"))]:
        with pytest.raises(grpc.RpcError) as err:
            client.call(name, req, timeout=5)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "stalled" in err.value.details(), name
    worker.cancel()
    # A worker with the patch (re)connects: the same inbox is delivered again and the turn commits.
    fixed = RawWorker(sidecar.address)
    again = fixed.next_workflow()
    assert kinds(again.workflowRequest.newEvents) == ["WorkflowStarted", "EventRaised"]
    fixed.answer(again, complete(1, "x"), patches=["p1"])
    wait_status(client, "p", pb.ORCHESTRATION_STATUS_COMPLETED)
    kinds_after = kinds(history(client, "p"))
    assert kinds_after.count("ExecutionStalled") == 1 and kinds_after[-1] == "ExecutionCompleted"
    fixed.cancel()


def test_stall_event_not_repeated_for_same_description(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "q", patches=["a", "b"])
    raise_event(client, "q")
    worker.answer(worker.next_workflow(), patches=["b", "a"])
    wait_status(client, "q", pb.ORCHESTRATION_STATUS_STALLED)
    worker.cancel()
    again = RawWorker(sidecar.address)
    again.answer(again.next_workflow(), patches=["b", "a"])  # applied before CompleteOrchestratorTask returns
    assert kinds(history(client, "q")).count("ExecutionStalled") == 1
    assert "History patches: [a, b], current patches: [b, a]. " in history(client, "q")[-1].executionStalled.description
    again.cancel()


def test_patches_compacted_and_version_name_kept(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "c", patches=["p1"], version_name="v2")
    raise_event(client, "c")
    worker.answer(worker.next_workflow(), complete(1, "ok"), patches=["p1", "p2"], version_name="v2")
    wait_status(client, "c", pb.ORCHESTRATION_STATUS_COMPLETED)
    versions = [list(e.workflowStarted.version.patches) for e in history(client, "c") if e.HasField("workflowStarted")]
    assert versions == [["p1"], ["p2"]]
    state = client.call("GetInstance", pb.GetInstanceRequest(instanceId="c")).workflowState
    assert state.version.value == "v2"
    worker.cancel()


def test_version_not_available_stalls_until_worker_has_it(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "v", version_name="v1")
    raise_event(client, "v")
    na = pb.WorkflowAction(id=1)
    na.workflowVersionNotAvailable.SetInParent()
    worker.answer(worker.next_workflow(), na)
    wait_status(client, "v", pb.ORCHESTRATION_STATUS_STALLED)
    stalled = history(client, "v")[-1].executionStalled
    assert stalled.reason == pb.VERSION_NOT_AVAILABLE and stalled.description == "Version not available: v1"
    worker.cancel()
    ok = RawWorker(sidecar.address)
    ok.answer(ok.next_workflow(), complete(1, "done"), version_name="v1")
    wait_status(client, "v", pb.ORCHESTRATION_STATUS_COMPLETED)
    ok.cancel()


def test_payload_size_stall_and_force_purge():
    srv = SidecarServer.start(port=0, db=":memory:", max_payload=2000)
    channel = grpc.insecure_channel(srv.address)
    client = TaskHubClient(channel)
    try:
        worker = RawWorker(srv.address)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            fut = pool.submit(client.call, "StartInstance", create("big"), timeout=10)
            worker.answer(worker.next_workflow())
            fut.result(timeout=10)
        raise_event(client, "big", data="x" * 3000)
        wait_status(client, "big", pb.ORCHESTRATION_STATUS_STALLED)
        stalled = history(client, "big")[-1].executionStalled
        assert stalled.reason == pb.PAYLOAD_SIZE_EXCEEDED and "exceeds 95% of max gRPC body size 2000" in stalled.description
        with pytest.raises(grpc.RpcError):
            client.call("PurgeInstances", pb.PurgeInstancesRequest(instanceId="big"), timeout=5)
        resp = client.call("PurgeInstances", pb.PurgeInstancesRequest(instanceId="big", force=True), timeout=5)
        assert resp.deletedInstanceCount == 1
        assert not client.call("GetInstance", pb.GetInstanceRequest(instanceId="big")).exists
        worker.cancel()
    finally:
        channel.close()
        srv.stop()


def test_continue_as_new_carries_events_and_replaces_history(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    first = begin(worker, client, background, "can")
    exec1 = first.workflowRequest.executionId.value
    raise_event(client, "can", "kept")
    turn = worker.next_workflow()
    carried = [e for e in turn.workflowRequest.newEvents if e.HasField("eventRaised")]
    worker.answer(turn, complete(1, "2", status=pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW, carryover=carried))
    nxt = worker.next_workflow()
    req = nxt.workflowRequest
    assert list(req.pastEvents) == []
    assert kinds(req.newEvents) == ["WorkflowStarted", "ExecutionStarted", "EventRaised"]
    assert req.newEvents[1].executionStarted.input.value == "2"
    assert req.executionId.value != exec1
    assert status(client, "can") == pb.ORCHESTRATION_STATUS_RUNNING
    worker.answer(nxt, complete(1, "end"))
    wait_status(client, "can", pb.ORCHESTRATION_STATUS_COMPLETED)
    assert kinds(history(client, "can")) == ["WorkflowStarted", "ExecutionStarted", "EventRaised", "ExecutionCompleted"]
    worker.cancel()


def test_child_completion_and_default_id(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "parent", child(1, "Child", "in"))
    child_turn = worker.next_workflow()
    creq = child_turn.workflowRequest
    assert creq.instanceId == "parent:0001"
    es = creq.newEvents[1].executionStarted
    assert (es.parentInstance.taskScheduledId, es.parentInstance.workflowInstance.instanceId) == (1, "parent")
    worker.answer(child_turn, complete(1, "out"))
    parent_turn = worker.next_workflow()
    done = parent_turn.workflowRequest.newEvents[1].childWorkflowInstanceCompleted
    assert (done.taskScheduledId, done.result.value) == (1, "out")
    state = client.call("GetInstance", pb.GetInstanceRequest(instanceId="parent:0001")).workflowState
    assert state.parentInstanceId.value == "parent"
    worker.answer(parent_turn, complete(2, "out"))
    wait_status(client, "parent", pb.ORCHESTRATION_STATUS_COMPLETED)
    worker.cancel()


def test_recursive_terminate_reaches_children_and_parent_gets_failure(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "tp", child(1, "Child"))
    worker.answer(worker.next_workflow())  # the child waits forever
    term = background.submit(client.call, "TerminateInstance",
                             pb.TerminateRequest(instanceId="tp", recursive=True,
                                                 output=pb.TerminateRequest().output.__class__(value='"bye"')),
                             timeout=10)
    turn = worker.next_workflow()
    assert turn.workflowRequest.instanceId == "tp"
    assert kinds(turn.workflowRequest.newEvents) == ["WorkflowStarted", "ExecutionTerminated"]
    worker.answer(turn, schedule(2, "ignored"))  # R3.16: engine enforces the termination anyway
    term.result(timeout=10)
    assert status(client, "tp") == pb.ORCHESTRATION_STATUS_TERMINATED
    child_turn = worker.next_workflow()
    assert child_turn.workflowRequest.instanceId == "tp:0001"
    assert child_turn.workflowRequest.newEvents[1].executionTerminated.recurse
    worker.answer(child_turn, complete(1, '"bye"', status=pb.ORCHESTRATION_STATUS_TERMINATED))
    wait_status(client, "tp:0001", pb.ORCHESTRATION_STATUS_TERMINATED)
    out = client.call("GetInstance", pb.GetInstanceRequest(instanceId="tp", getInputsAndOutputs=True))
    assert out.workflowState.output.value == '"bye"'
    assert "TaskScheduled" not in kinds(history(client, "tp"))
    # Purge recursively removes both.
    resp = client.call("PurgeInstances", pb.PurgeInstancesRequest(instanceId="tp", recursive=True))
    assert resp.deletedInstanceCount == 2
    worker.cancel()


def test_suspend_resume_and_resume_of_running_is_recorded(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "s")
    # Not suspended: recorded all the same, as both real engines do (R6.7); a worker must ignore it.
    client.call("ResumeInstance", pb.ResumeRequest(instanceId="s"), timeout=5)
    assert _events_until(worker, "ExecutionResumed") == ["ExecutionResumed"]
    assert status(client, "s") == pb.ORCHESTRATION_STATUS_RUNNING
    sus = background.submit(client.call, "SuspendInstance", pb.SuspendRequest(instanceId="s"), timeout=10)
    t = worker.next_workflow()
    assert kinds(t.workflowRequest.newEvents) == ["WorkflowStarted", "ExecutionSuspended"]
    worker.answer(t)
    sus.result(timeout=10)
    assert status(client, "s") == pb.ORCHESTRATION_STATUS_SUSPENDED
    raise_event(client, "s")  # the engine does not block while suspended (R6.7)
    worker.answer(worker.next_workflow())
    res = background.submit(client.call, "ResumeInstance", pb.ResumeRequest(instanceId="s"), timeout=10)
    worker.answer(worker.next_workflow(), complete(1, "r"))
    res.result(timeout=10)
    assert status(client, "s") == pb.ORCHESTRATION_STATUS_COMPLETED
    assert "ExecutionResumed" in kinds(history(client, "s"))
    worker.cancel()


def test_purge_rules(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "r")
    with pytest.raises(grpc.RpcError) as err:
        client.call("PurgeInstances", pb.PurgeInstancesRequest(instanceId="r"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not yet completed" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        client.call("PurgeInstances", pb.PurgeInstancesRequest(instanceId="missing"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    flt = pb.PurgeInstancesRequest()  # a filter purges finished instances only: "r" is running
    flt.purgeInstanceFilter.runtimeStatus.append(pb.ORCHESTRATION_STATUS_COMPLETED)
    assert client.call("PurgeInstances", flt).deletedInstanceCount == 0
    assert client.call("GetInstance", pb.GetInstanceRequest(instanceId="r")).exists
    worker.cancel()


def test_reuse_of_finished_id_and_enforce_unique(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "u", complete(1, "a"))
    with pytest.raises(grpc.RpcError) as err:
        client.call("StartInstance", create("u", enforceUniqueInstanceId=True), timeout=5)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    begin(worker, client, background, "u")  # reuse: a fresh run
    assert kinds(history(client, "u")) == ["WorkflowStarted", "ExecutionStarted"]
    with pytest.raises(grpc.RpcError) as err:
        client.call("StartInstance", create("u"), timeout=5)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    worker.cancel()


def test_custom_status_replaced_every_turn(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "cs", custom_status="a")
    get = pb.GetInstanceRequest(instanceId="cs", getInputsAndOutputs=True)
    assert client.call("GetInstance", get).workflowState.customStatus.value == "a"
    raise_event(client, "cs")
    worker.answer(worker.next_workflow())  # applied before CompleteOrchestratorTask returns
    assert not client.call("GetInstance", get).workflowState.HasField("customStatus")
    worker.cancel()


def test_stale_action_ids_redeliver_turn(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "st", schedule(1, "A"))
    act = worker.next_activity()
    worker.complete_activity(act, "r")
    turn = worker.next_workflow()
    worker.answer(turn, schedule(1, "A"))  # id 1 is already in history: a stale answer (R3.14)
    again = worker.next_workflow()
    assert again.completionToken != turn.completionToken
    assert kinds(again.workflowRequest.newEvents) == ["WorkflowStarted", "TaskCompleted"]
    worker.answer(again, complete(2, "r"))
    wait_status(client, "st", pb.ORCHESTRATION_STATUS_COMPLETED)
    worker.cancel()
    # The refusal is kept as data for the harness (taskhub_core.incidents), not only logged.
    refused = [i for i in sidecar.engine.incidents.snapshot()["st"] if i.kind is IncidentKind.STALE_ANSWER]
    assert [(i.action.id, i.action.kind, i.action.holder, i.action.holder_failed, i.count) for i in refused] == [
        (1, "scheduleTask", "taskScheduled", False, 1)]


def _optional_wait(action_id: int, name: str) -> pb.WorkflowAction:
    """The action of an indefinite wait_for_external_event in dapr's Python SDK 1.19.0."""
    a = pb.WorkflowAction(id=action_id)
    a.createTimer.fireAt.seconds, a.createTimer.fireAt.nanos = 253402300799, 999999999
    a.createTimer.externalEvent.name = name
    return a


def test_action_at_an_optional_timers_id_is_recorded(sidecar, client, background):
    # R3.14 (a): code changed under a running instance (python-sdk examples/workflow/versioning.py,
    # test5) replays without the optional timer at id 1 and schedules an activity at that id; daprd
    # records it (durabletask-go applier.go applies every action at its id), so does the reference.
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "ot", _optional_wait(1, "go"))
    raise_event(client, "ot")
    turn = worker.next_workflow()
    worker.answer(turn, schedule(1, "A"))
    act = worker.next_activity()
    assert act.activityRequest.taskId == 1 and act.activityRequest.name == "A"
    assert kinds(history(client, "ot"))[-3:] == ["WorkflowStarted", "EventRaised", "TaskScheduled"]
    worker.complete_activity(act, "r")
    worker.answer(worker.next_workflow(), complete(2, "r"))
    wait_status(client, "ot", pb.ORCHESTRATION_STATUS_COMPLETED)
    worker.cancel()


def test_refused_answers_stall_after_a_bound(sidecar, client, background):
    # R3.14 (b): a worker that keeps answering with a taken id does not loop silently: after
    # REFUSALS_BEFORE_STALL refusals the instance is STALLED with the reason and count, and a worker
    # that connects again (new code) gets the turn.
    from fake_sidecar.engine.completions import REFUSALS_BEFORE_STALL
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "rf", schedule(1, "A"))
    worker.complete_activity(worker.next_activity(), "r")
    for _ in range(REFUSALS_BEFORE_STALL):
        worker.answer(worker.next_workflow(), timer(1, 0))
    wait_status(client, "rf", pb.ORCHESTRATION_STATUS_STALLED)
    stalled = history(client, "rf")[-1].executionStalled
    assert (f"refused {REFUSALS_BEFORE_STALL} times in a row: action id 1 (createTimer) is already in history "
            "as taskScheduled") in stalled.description
    worker.cancel()
    fixed = RawWorker(sidecar.address)
    again = fixed.next_workflow()
    fixed.answer(again, complete(2, "r"))
    wait_status(client, "rf", pb.ORCHESTRATION_STATUS_COMPLETED)
    fixed.cancel()


def test_timer_fired_is_stamped_when_it_fires(sidecar, client, background):
    # R2.6: TimerFired carries its firing time (at or after fireAt), before its turn's WorkflowStarted;
    # the engine differential found it committed without a timestamp.
    worker = RawWorker(sidecar.address)
    fire_at = time.time_ns() + 200_000_000
    begin(worker, client, background, "tf", timer(1, fire_at))
    turn = worker.next_workflow()
    ws, fired = turn.workflowRequest.newEvents
    assert fired.HasField("timerFired") and fired.HasField("timestamp")
    assert fire_at <= fired.timestamp.ToNanoseconds() < ws.timestamp.ToNanoseconds()
    worker.answer(turn, complete(2, "done"))
    wait_status(client, "tf", pb.ORCHESTRATION_STATUS_COMPLETED)
    assert history(client, "tf")[4].timestamp == fired.timestamp
    worker.cancel()


def test_list_instance_ids_pages_with_opaque_token(sidecar, client, background):
    for i in range(7):
        client.call("StartInstance", create(f"l{i}", scheduledStartTimestamp=_future()), timeout=5)
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        req = pb.ListInstanceIDsRequest(pageSize=3)
        if token:
            req.continuationToken = token
        resp = client.call("ListInstanceIDs", req)
        seen.extend(resp.instanceIds)
        pages += 1
        if not resp.HasField("continuationToken"):
            break
        token = resp.continuationToken
    assert sorted(seen) == [f"l{i}" for i in range(7)] and pages == 3
    with pytest.raises(grpc.RpcError) as err:
        client.call("ListInstanceIDs", pb.ListInstanceIDsRequest(continuationToken="garbage!"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _future():
    from google.protobuf.timestamp_pb2 import Timestamp

    t = Timestamp()
    t.FromNanoseconds(time.time_ns() + 3600 * 10**9)
    return t


def test_rerun_from_activity_event(sidecar, client, background):
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "src", schedule(1, "A", "in"))
    worker.complete_activity(worker.next_activity(), "out")
    worker.answer(worker.next_workflow(), complete(2, "out"))
    wait_status(client, "src", pb.ORCHESTRATION_STATUS_COMPLETED)
    with pytest.raises(grpc.RpcError) as err:
        client.call("RerunWorkflowFromEvent", pb.RerunWorkflowFromEventRequest(sourceInstanceID="src", eventID=9))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    req = pb.RerunWorkflowFromEventRequest(sourceInstanceID="src", eventID=1, newInstanceID="dst", overwriteInput=True)
    req.input.value = "new-in"
    assert client.call("RerunWorkflowFromEvent", req).newInstanceID == "dst"
    act = worker.next_activity()
    assert act.activityRequest.workflowInstance.instanceId == "dst" and act.activityRequest.input.value == "new-in"
    hist = history(client, "dst")
    assert kinds(hist) == ["WorkflowStarted", "ExecutionStarted", "TaskScheduled"]
    assert hist[2].taskScheduled.rerunParentInstanceInfo.instanceID == "src"
    worker.complete_activity(act, "again")
    worker.answer(worker.next_workflow(), complete(2, "again"))
    wait_status(client, "dst", pb.ORCHESTRATION_STATUS_COMPLETED)
    worker.cancel()


def test_stateful_history_sends_deltas_only_to_capable_streams(sidecar, client, background):
    worker = RawWorker(sidecar.address, capabilities=[pb.WORKER_CAPABILITY_STATEFUL_HISTORY])
    begin(worker, client, background, "sh")
    raise_event(client, "sh")
    t2 = worker.next_workflow()
    assert not t2.workflowRequest.HasField("cachedHistory")
    worker.answer(t2)
    raise_event(client, "sh")
    t3 = worker.next_workflow()
    assert t3.workflowRequest.cachedHistory.eventCount == len(t2.workflowRequest.pastEvents)
    assert kinds(t3.workflowRequest.pastEvents) == ["WorkflowStarted", "EventRaised"]
    worker.cancel()


def test_activity_lease_expiry_redispatches_with_new_token(background):
    srv = SidecarServer.start(port=0, db=":memory:", activity_lease=0.3)
    channel = grpc.insecure_channel(srv.address)
    client = TaskHubClient(channel)
    try:
        worker = RawWorker(srv.address)
        fut = background.submit(client.call, "StartInstance", create("lease"), timeout=10)
        worker.answer(worker.next_workflow(), schedule(1, "slow"))
        fut.result(timeout=10)
        first = worker.next_activity()
        second = worker.next_activity(timeout=5)  # the lease ran out: dispatched again
        assert second.activityRequest.taskId == 1 and second.completionToken != first.completionToken
        worker.complete_activity(first, "late")  # zombie
        worker.complete_activity(second, "fresh")
        turn = worker.next_workflow()
        assert turn.workflowRequest.newEvents[1].taskCompleted.result.value == "fresh"
        worker.cancel()
    finally:
        channel.close()
        srv.stop()


def test_virtual_clock_fires_a_day_long_timer_at_once(background):
    srv = SidecarServer.start(port=0, db=":memory:", clock="virtual")
    channel = grpc.insecure_channel(srv.address)
    client = TaskHubClient(channel)
    try:
        worker = RawWorker(srv.address)
        fut = background.submit(client.call, "StartInstance", create("vc"), timeout=10)
        worker.answer(worker.next_workflow(), timer(1, time.time_ns() + 86400 * 10**9))
        fut.result(timeout=10)
        # A ten-day timer fires at once: the deadline is a hang's, not a timing assertion.
        fired = worker.next_workflow(timeout=60)
        assert fired.workflowRequest.newEvents[1].timerFired.timerId == 1
        worker.cancel()
    finally:
        channel.close()
        srv.stop()


def _events_until(worker, kind: str) -> list[str]:
    """The new events of the turns the worker gets (each answered with no actions) until one holds `kind`."""
    seen: list[str] = []
    while kind not in seen:
        turn = worker.next_workflow()
        seen += [k for k in kinds(turn.workflowRequest.newEvents) if k != "WorkflowStarted"]
        worker.answer(turn)
    return seen


def test_second_suspend_is_recorded(sidecar, client, background):
    """As both real engines do (R6.7): a suspend of a suspended instance records a second ExecutionSuspended."""
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "ss")
    sus = background.submit(client.call, "SuspendInstance", pb.SuspendRequest(instanceId="ss"), timeout=10)
    worker.answer(worker.next_workflow())
    sus.result(timeout=10)
    client.call("SuspendInstance", pb.SuspendRequest(instanceId="ss"), timeout=5)  # already suspended: recorded
    res = background.submit(client.call, "ResumeInstance", pb.ResumeRequest(instanceId="ss"), timeout=10)
    assert _events_until(worker, "ExecutionResumed") == ["ExecutionSuspended", "ExecutionResumed"]
    res.result(timeout=10)
    assert kinds(history(client, "ss")).count("ExecutionSuspended") == 2
    assert status(client, "ss") == pb.ORCHESTRATION_STATUS_RUNNING
    worker.cancel()


def test_activity_scheduled_by_the_completing_turn_is_dispatched(sidecar, client, background):
    """R4.1: both engines dispatch every TaskScheduled of a committed turn, also one whose answer
    completes the workflow (daprd run.go:341,409; durabletask-go sqlite.go:309-327 inserts PendingTasks)."""
    worker = RawWorker(sidecar.address)
    begin(worker, client, background, "fire", schedule(1, "Notify", "bye"), complete(2, "done"))
    wait_status(client, "fire", pb.ORCHESTRATION_STATUS_COMPLETED)
    act = worker.next_activity()
    assert (act.activityRequest.name, act.activityRequest.taskId, act.activityRequest.input.value) == ("Notify", 1, "bye")
    worker.complete_activity(act, "ignored")  # its result reaches a finished instance and is dropped (R4.8)
    assert kinds(history(client, "fire"))[-2:] == [EventKind.TASK_SCHEDULED, EventKind.EXECUTION_COMPLETED]
    worker.cancel()
