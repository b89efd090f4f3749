"""The fault proxy: forwarding, transcript, each fault action, rule matching and validation."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest
from google.protobuf import empty_pb2

from conformance.errors import InputError
from conformance.proxy import (
    CUT_DETAILS,
    DROPPED_RESPONSE_DETAILS,
    FaultProxy,
    FaultRule,
    MessageMatch,
    parse_rules,
)
from taskhub_wire import pb
from tests.sidecar.rawworker import RawWorker, complete, kinds, schedule
from tests.waiting import wait_for


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def workers() -> Iterator[Callable[..., RawWorker]]:
    made: list[RawWorker] = []

    def make(address: str, **kw: object) -> RawWorker:
        worker = RawWorker(address, **kw)  # type: ignore[arg-type]
        made.append(worker)
        return worker

    yield make
    for worker in made:
        worker.cancel()


def rule(rpc: str, action: str, *, direction: str = "", where: dict | None = None, nth: int | None = None,
         **kw: object) -> FaultRule:
    return FaultRule(match=MessageMatch(rpc=rpc, direction=direction, where=where or {}, nth=nth), action=action,
                     **kw)  # type: ignore[arg-type]


def start_with_activities(client, worker: RawWorker, background, iid: str, *names: str) -> None:
    """Start instance `iid` whose first turn schedules activities 1..n (names) with input '"x"'."""
    fut = background.submit(client.call, "StartInstance", pb.CreateInstanceRequest(instanceId=iid, name="W"),
                            timeout=10)
    worker.answer(worker.next_workflow(), *(schedule(i, n, '"x"') for i, n in enumerate(names or ("echo",), 1)))
    fut.result(timeout=10)


def history_kinds(client, iid: str) -> list[str]:
    return kinds(client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid), timeout=5).events)


def stream_status(worker: RawWorker, timeout: float = 5.0) -> tuple[grpc.StatusCode, str]:
    worker._thread.join(timeout)  # the pump ends when the stream does
    assert not worker._thread.is_alive(), "the worker's GetWorkItems stream is still open"
    return worker._call.code(), worker._call.details()


def entries(proxy: FaultProxy, rpc: str, direction: str) -> list:
    return [e for e in proxy.transcript() if e.rpc == rpc and e.direction == direction]


# --------------------------------------------------------------------------- plain forwarding


def test_forwarding_completes_a_workflow_and_records_a_decoded_transcript(sidecar, proxy, make_client, workers,
                                                                          background):
    client = make_client(proxy.address)
    client.call("Hello", empty_pb2.Empty(), timeout=5)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "fw-1", "echo")
    act = worker.next_activity()
    worker.complete_activity(act, '"x"')
    turn = worker.next_workflow()
    worker.answer(turn, complete(2, '"done"'))
    done = client.call("WaitForInstanceCompletion", pb.GetInstanceRequest(instanceId="fw-1", getInputsAndOutputs=True),
                       timeout=10)
    assert done.workflowState.output.value == '"done"'

    tr = proxy.transcript()
    assert [e.t for e in tr] == sorted(e.t for e in tr) and tr[0].t >= 0
    assert all(e.fault is None for e in tr)
    by = {(e.rpc, e.direction): e for e in tr}
    assert by[("Hello", "request")].channel == "worker"
    assert by[("StartInstance", "request")].channel == "client"
    assert by[("StartInstance", "request")].message == {"instanceId": "fw-1", "name": "W"}
    assert by[("GetWorkItems", "request")].channel == "worker"

    items = [e.summary for e in entries(proxy, "GetWorkItems", "item")]
    token = act.completionToken[:8]
    assert items[0].startswith("WorkItem workflowRequest fw-1 past=0 new=[WorkflowStarted, ExecutionStarted]")
    assert items[1] == f'WorkItem activityRequest echo#1 fw-1 input="x" token={token}..'
    assert items[2].startswith("WorkItem workflowRequest fw-1 past=3 new=[WorkflowStarted, TaskCompleted#1]")

    completion = entries(proxy, "CompleteActivityTask", "request")[0]
    assert completion.channel == "worker"
    assert completion.summary == f'CompleteActivityTask fw-1#1 result="x" token={token}..'
    assert completion.message == {"instanceId": "fw-1", "taskId": 1, "result": '"x"',
                                  "completionToken": act.completionToken}
    turns = [e.summary for e in entries(proxy, "CompleteOrchestratorTask", "request")]
    assert turns[0].startswith("CompleteOrchestratorTask fw-1 [ScheduleTask#1 echo] token=")
    assert turns[1].startswith('CompleteOrchestratorTask fw-1 [CompleteWorkflow#2 COMPLETED result="done"]')
    assert entries(proxy, "CompleteActivityTask", "response")[0].summary.startswith(
        "CompleteActivityTask → OK CompleteTaskResponse")
    assert proxy.fault_log() == []

    proxy.reset_transcript()
    assert proxy.transcript() == []
    client.call("GetInstance", pb.GetInstanceRequest(instanceId="fw-1"), timeout=5)
    assert [(e.rpc, e.direction) for e in proxy.transcript()] == [("GetInstance", "request"),
                                                                 ("GetInstance", "response")]
    assert proxy.transcript()[0].t < 5


def test_huge_payloads_are_truncated_in_the_transcript_but_forwarded_whole(sidecar, proxy, make_client, workers,
                                                                           background):
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    big = json.dumps("y" * 100_000)
    fut = background.submit(client.call, "StartInstance", _with_input("big", big), timeout=10)
    turn = worker.next_workflow()
    assert turn.workflowRequest.newEvents[1].executionStarted.input.value == big  # untouched
    worker.answer(turn, complete(1, big))
    fut.result(timeout=10)
    recorded = entries(proxy, "StartInstance", "request")[0].message["input"]
    assert len(recorded) < 2000 and recorded.endswith("chars)")
    assert len(entries(proxy, "CompleteOrchestratorTask", "request")[0].summary) < 200


def _with_input(iid: str, value: str) -> pb.CreateInstanceRequest:
    req = pb.CreateInstanceRequest(instanceId=iid, name="W")
    req.input.value = value
    return req


# --------------------------------------------------------------------------- metadata, deadlines, errors


class _EchoUpstream:
    """A stand-in upstream that reports what it received: metadata and the deadline left."""

    def __init__(self) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("TaskHubSidecarService", {
            "GetInstance": grpc.unary_unary_rpc_method_handler(self.get_instance),
            "RaiseEvent": grpc.unary_unary_rpc_method_handler(self.raise_event),
        })])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @staticmethod
    def get_instance(raw: bytes, context: grpc.ServicerContext) -> bytes:
        md = {m.key: m.value if isinstance(m.value, str) else m.value.hex() for m in context.invocation_metadata()}
        left = context.time_remaining()
        resp = pb.GetInstanceResponse(exists=True)
        resp.workflowState.name = json.dumps({"md": md, "left": left if left < 1e9 else None})
        resp.workflowState.instanceId = pb.GetInstanceRequest.FromString(raw).instanceId
        context.send_initial_metadata((("x-initial", "i"),))
        context.set_trailing_metadata((("x-trail", "t"),))
        return resp.SerializeToString()

    @staticmethod
    def raise_event(raw: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_trailing_metadata((("x-why", "because"),))
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, "instance is stalled; fix the worker")
        raise AssertionError("unreachable")


def test_metadata_deadline_and_trailers_pass_through(make_proxy, make_client):
    upstream = _EchoUpstream()
    try:
        proxy = make_proxy(f"127.0.0.1:{upstream.port}")
        client = make_client(proxy.address, metadata=(("dapr-api-token", "secret"), ("x-blob-bin", b"\x00\x01")))
        resp, call = client._channel.unary_unary(
            "/TaskHubSidecarService/GetInstance", request_serializer=pb.GetInstanceRequest.SerializeToString,
            response_deserializer=pb.GetInstanceResponse.FromString,
        ).with_call(pb.GetInstanceRequest(instanceId="m"), timeout=5,
                    metadata=(("dapr-api-token", "secret"), ("x-blob-bin", b"\x00\x01")))
        seen = json.loads(resp.workflowState.name)
        assert seen["md"]["dapr-api-token"] == "secret" and seen["md"]["x-blob-bin"] == "0001"
        assert 3.0 < seen["left"] <= 5.1, seen  # the caller's deadline reached upstream (grpc rounds it up a little)
        assert ("x-initial", "i") in tuple(call.initial_metadata())
        assert ("x-trail", "t") in tuple(call.trailing_metadata())

        no_deadline = client.call("GetInstance", pb.GetInstanceRequest(instanceId="n"))
        assert json.loads(no_deadline.workflowState.name)["left"] is None  # none set, none invented

        with pytest.raises(grpc.RpcError) as err:
            client.call("RaiseEvent", pb.RaiseEventRequest(instanceId="m", name="e"), timeout=5)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert err.value.details() == "instance is stalled; fix the worker"
        assert ("x-why", "because") in tuple(err.value.trailing_metadata())
        failed = entries(proxy, "RaiseEvent", "response")[0]
        assert failed.status == "FAILED_PRECONDITION" and "stalled" in failed.summary
    finally:
        upstream.server.stop(0)


def test_sidecar_errors_pass_through_with_code_and_details(make_sidecar, make_proxy, make_client):
    sidecar = make_sidecar(api_token="t")
    proxy = make_proxy(sidecar.address)
    anonymous = make_client(proxy.address)
    with pytest.raises(grpc.RpcError) as err:
        anonymous.call("GetInstance", pb.GetInstanceRequest(instanceId="x"), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "dapr-api-token" in err.value.details()
    assert entries(proxy, "GetInstance", "response")[0].status == "UNAUTHENTICATED"

    client = make_client(proxy.address, metadata=(("dapr-api-token", "t"),))
    assert not client.call("GetInstance", pb.GetInstanceRequest(instanceId="x"), timeout=5).exists
    with pytest.raises(grpc.RpcError) as err:
        client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="nope"), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "not found" in err.value.details()

    # A worker stream that upstream refuses ends with upstream's status.
    worker = RawWorker(proxy.address)
    worker._thread.join(5)
    assert worker._call.code() == grpc.StatusCode.UNAUTHENTICATED
    worker.cancel()

    # Unknown methods are forwarded raw: upstream answers UNIMPLEMENTED.
    channel = grpc.insecure_channel(proxy.address)
    try:
        with pytest.raises(grpc.RpcError) as err:
            channel.unary_unary("/TaskHubSidecarService/NoSuchMethod")(b"\x01", timeout=5,
                                                                         metadata=(("dapr-api-token", "t"),))
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        unknown = [e for e in proxy.transcript() if e.rpc == "/TaskHubSidecarService/NoSuchMethod"]
        assert [e.direction for e in unknown] == ["request", "response"]
        assert unknown[1].status == "UNIMPLEMENTED"

        # Undecodable bytes go through untouched; the sidecar's own error comes back.
        with pytest.raises(grpc.RpcError) as err:
            channel.unary_unary("/TaskHubSidecarService/GetInstance")(b"\xff\xff\xff", timeout=5,
                                                                      metadata=(("dapr-api-token", "t"),))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed GetInstanceRequest" in err.value.details()
        bad = entries(proxy, "GetInstance", "request")[-1]
        assert "undecodable 3 bytes" in bad.summary and bad.message == {"_undecodable_bytes": 3}
    finally:
        channel.close()


# --------------------------------------------------------------------------- drop


def test_dropped_completion_is_lost_and_the_lease_redelivers(make_sidecar, make_proxy, make_client, workers,
                                                             background):
    sidecar = make_sidecar(activity_lease=0.5)
    proxy = make_proxy(sidecar.address, [rule("CompleteActivityTask", "drop", where={"taskId": 1}, nth=1)])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "drop-1", "echo")
    first = worker.next_activity()
    worker.complete_activity(first, '"lost"')  # OK: the proxy answered with an empty CompleteTaskResponse
    c = sidecar.engine.counters
    assert (c.unknown_activity, c.zombie_activity) == (0, 0)  # the sidecar never saw it
    assert history_kinds(client, "drop-1") == ["WorkflowStarted", "ExecutionStarted", "TaskScheduled"]

    again = worker.next_activity(timeout=5)  # lease expired: dispatched again with a new token
    assert again.activityRequest.taskId == 1 and again.completionToken != first.completionToken
    worker.complete_activity(again, '"kept"')
    turn = worker.next_workflow()
    done = [e.taskCompleted.result.value for e in turn.workflowRequest.newEvents if e.HasField("taskCompleted")]
    assert done == ['"kept"']

    dropped = entries(proxy, "CompleteActivityTask", "request")
    assert [e.fault for e in dropped] == ["drop (rule 0)", None]
    answers = entries(proxy, "CompleteActivityTask", "response")
    assert [a.fault for a in answers] == ["drop (rule 0)", None]
    assert "answered by the fault proxy, not forwarded" in answers[0].summary
    log = proxy.fault_log()
    assert [(f.rule_index, f.action, f.rpc, f.direction) for f in log] == [(0, "drop", "CompleteActivityTask",
                                                                             "request")]
    assert '"lost"' in log[0].summary and "drop" in log[0].rule


def test_dropped_work_item_never_reaches_the_worker(make_sidecar, make_proxy, make_client, workers, background):
    sidecar = make_sidecar(activity_lease=0.5)
    proxy = make_proxy(sidecar.address, [rule("GetWorkItems", "drop", where={"kind": "activity"})])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "drop-item", "echo")
    item = worker.next_activity(timeout=5)  # the redelivery after the lease, not the dropped first dispatch
    seen = entries(proxy, "GetWorkItems", "item")
    activity_items = [e for e in seen if "activityRequest" in e.message]
    assert [e.fault for e in activity_items] == ["drop (rule 0)", None]
    assert activity_items[0].message["completionToken"] != item.completionToken
    assert sidecar.engine.counters.redispatched_activities >= 1


def test_dropped_response_fails_the_caller_after_upstream_applied_it(sidecar, make_proxy, make_client, workers,
                                                                     background):
    proxy = make_proxy(sidecar.address, [rule("CompleteActivityTask", "drop", direction="response")])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "drop-resp", "echo")
    act = worker.next_activity()
    with pytest.raises(grpc.RpcError) as err:
        worker.complete_activity(act, '"x"')
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and err.value.details() == DROPPED_RESPONSE_DETAILS
    turn = worker.next_workflow()  # but the sidecar applied it
    assert kinds(turn.workflowRequest.newEvents) == ["WorkflowStarted", "TaskCompleted"]
    assert entries(proxy, "CompleteActivityTask", "response")[0].fault == "drop (rule 0)"


# --------------------------------------------------------------------------- duplicate


def test_duplicated_completion_is_applied_once(sidecar, make_proxy, make_client, workers, background):
    proxy = make_proxy(sidecar.address, [rule("CompleteActivityTask", "duplicate", where={"taskId": 1})])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "dup", "echo")
    act = worker.next_activity()
    worker.complete_activity(act, '"x"')
    # The copy is sent before the caller gets its (first) answer.
    assert sidecar.engine.counters.unknown_activity + sidecar.engine.counters.zombie_activity == 1
    worker.answer(worker.next_workflow(), complete(2, '"x"'))
    assert history_kinds(client, "dup").count("TaskCompleted") == 1
    sent = entries(proxy, "CompleteActivityTask", "request")
    assert [e.fault for e in sent] == ["duplicate (rule 0)", "duplicate copy (rule 0)"]
    assert sent[0].message == sent[1].message
    assert len(entries(proxy, "CompleteActivityTask", "response")) == 2


def test_duplicated_work_item_is_delivered_twice(sidecar, make_proxy, make_client, workers, background):
    proxy = make_proxy(sidecar.address, [rule("GetWorkItems", "duplicate",
                                              where={"activityRequest.name": ["echo", "other"]})])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "dup-item", "echo")
    one, two = worker.next_activity(), worker.next_activity()
    assert one == two
    worker.complete_activity(one, '"a"')
    worker.complete_activity(two, '"b"')  # the second completion finds nothing pending
    turn = worker.next_workflow()
    done = [e.taskCompleted.result.value for e in turn.workflowRequest.newEvents if e.HasField("taskCompleted")]
    assert done == ['"a"'] and sidecar.engine.counters.unknown_activity == 1


# --------------------------------------------------------------------------- delay


def test_delay_holds_a_request_and_an_item(sidecar, make_proxy, make_client, workers, background):
    proxy = make_proxy(sidecar.address, [
        rule("CompleteActivityTask", "delay", delay_s=0.4),
        rule("GetWorkItems", "delay", where={"kind": "activity"}, delay_s=0.4),
    ])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    before = time.monotonic()
    start_with_activities(client, worker, background, "slow", "echo")
    act = worker.next_activity()
    assert time.monotonic() - before >= 0.4
    before = time.monotonic()
    worker.complete_activity(act, '"x"')  # the caller waits for the delayed forward
    assert time.monotonic() - before >= 0.4
    assert kinds(worker.next_workflow(timeout=0.5).workflowRequest.newEvents) == ["WorkflowStarted",
                                                                                  "TaskCompleted"]
    assert [f.action for f in proxy.fault_log()] == ["delay", "delay"]
    assert entries(proxy, "CompleteActivityTask", "request")[0].fault == "delay 0.4s (rule 0)"


# --------------------------------------------------------------------------- replay_later


def test_held_completion_replayed_after_redelivery_is_a_rejected_zombie(sidecar, make_proxy, make_client, workers,
                                                                        background):
    proxy = make_proxy(sidecar.address, [rule("CompleteActivityTask", "replay_later", where={"taskId": 1}, nth=1)])
    client = make_client(proxy.address)
    old = workers(proxy.address)
    start_with_activities(client, old, background, "zombie", "echo")
    first = old.next_activity()
    old.complete_activity(first, '"stale"')  # answered OK by the proxy, held back from the sidecar
    counters = sidecar.engine.counters
    assert (counters.unknown_activity, counters.zombie_activity) == (0, 0)
    assert proxy.pending_replays() == 1

    # The worker's connection dies while the activity is (as far as the sidecar knows) still out;
    # a second worker gets it again with a new token.
    assert proxy.cut_streams() == 1
    assert stream_status(old) == (grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
    new = workers(proxy.address)
    again = new.next_activity()
    assert again.activityRequest.taskId == 1 and again.completionToken != first.completionToken

    assert proxy.replay_pending() == 1  # the stale completion arrives now, after the redelivery
    assert counters.zombie_activity == 1 and counters.unknown_activity == 0
    assert proxy.replay_pending() == 0 and proxy.pending_replays() == 0

    new.complete_activity(again, '"real"')
    turn = new.next_workflow()
    done = [e.taskCompleted.result.value for e in turn.workflowRequest.newEvents if e.HasField("taskCompleted")]
    assert done == ['"real"']
    new.answer(turn, complete(2, '"real"'))
    assert history_kinds(client, "zombie").count("TaskCompleted") == 1

    sent = entries(proxy, "CompleteActivityTask", "request")
    assert [e.fault for e in sent] == ["replay_later (rule 0)", "replay (rule 0)", None]
    assert sent[1].message["completionToken"] == first.completionToken
    answers = entries(proxy, "CompleteActivityTask", "response")
    assert "answered by the fault proxy" in answers[0].summary
    assert [f.note for f in proxy.fault_log() if f.rule_index == 0] == ["", "replayed"]


def test_replay_after_s_with_forward_now_sends_a_late_duplicate_by_itself(sidecar, make_proxy, make_client, workers,
                                                                           background):
    proxy = make_proxy(sidecar.address, [rule("CompleteActivityTask", "replay_later", replay_after_s=0.3,
                                              forward_now=True)])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "replay-timed", "echo")
    worker.complete_activity(worker.next_activity(), '"x"')  # forwarded now: applied
    assert sidecar.engine.counters.unknown_activity == 0
    assert proxy.replay_pending() == 0  # timed copies are not released by replay_pending()
    wait_for(lambda: sidecar.engine.counters.unknown_activity == 1, "the timed copy reached the sidecar")
    worker.answer(worker.next_workflow(), complete(2, '"x"'))
    assert history_kinds(client, "replay-timed").count("TaskCompleted") == 1


def test_held_work_item_is_delivered_on_replay(sidecar, make_proxy, make_client, workers, background):
    proxy = make_proxy(sidecar.address, [rule("GetWorkItems", "replay_later", where={"kind": "activity"})])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "held-item", "echo")
    with pytest.raises(queue.Empty):
        worker.next(timeout=0.3)
    assert proxy.replay_pending() == 1
    act = worker.next_activity()
    assert act.activityRequest.taskId == 1
    assert [e.fault for e in entries(proxy, "GetWorkItems", "item") if "activityRequest" in e.message] == [
        "replay_later (rule 0)", "replay (rule 0)"]


# --------------------------------------------------------------------------- cut_stream


def test_cut_stream_on_an_item_ends_the_worker_stream_and_the_engine_redelivers(sidecar, make_proxy, make_client,
                                                                                workers, background):
    proxy = make_proxy(sidecar.address, [rule("GetWorkItems", "cut_stream", where={"kind": "activity"})])
    client = make_client(proxy.address)
    first = workers(proxy.address)
    start_with_activities(client, first, background, "cut", "echo")
    assert stream_status(first) == (grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
    assert first.items.empty()  # the matching item was not delivered
    wait_for(lambda: sidecar.engine.counters.redispatched_activities >= 1, "the sidecar requeued the activity")
    wait_for(lambda: proxy.open_streams() == 0, "the proxy forgot the cut stream")

    second = workers(proxy.address)
    act = second.next_activity()  # times=1: not cut again
    second.complete_activity(act, '"x"')
    second.answer(second.next_workflow(), complete(2, '"x"'))
    assert history_kinds(client, "cut")[-1] == "ExecutionCompleted"
    ends = entries(proxy, "GetWorkItems", "response")
    assert ends[0].status == "UNAVAILABLE" and ends[0].fault == "cut_stream (rule 0)"


def test_cut_stream_on_a_completion_fails_it_and_cuts_that_workers_stream(sidecar, make_proxy, make_client, workers,
                                                                          background):
    proxy = make_proxy(sidecar.address, [rule("CompleteActivityTask", "cut_stream")])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "cut-req", "echo")
    act = worker.next_activity()
    with pytest.raises(grpc.RpcError) as err:
        worker.complete_activity(act, '"x"')
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and err.value.details() == CUT_DETAILS
    assert stream_status(worker) == (grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
    wait_for(lambda: sidecar.engine.counters.redispatched_activities >= 1, "the sidecar requeued the activity")
    assert sidecar.engine.counters.unknown_activity == sidecar.engine.counters.zombie_activity == 0


def test_cut_stream_on_the_stream_request_refuses_the_stream(sidecar, make_proxy):
    proxy = make_proxy(sidecar.address, [rule("GetWorkItems", "cut_stream", direction="request")])
    worker = RawWorker(proxy.address)
    try:
        assert stream_status(worker) == (grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
        assert sidecar.engine.connected_streams() == 0
    finally:
        worker.cancel()


def test_a_worker_hanging_up_closes_the_upstream_stream(sidecar, proxy):
    worker = RawWorker(proxy.address)
    wait_for(lambda: sidecar.engine.connected_streams() == 1 and proxy.open_streams() == 1, "the stream is open")
    worker.cancel()
    wait_for(lambda: sidecar.engine.connected_streams() == 0, "the sidecar saw the stream close")
    wait_for(lambda: proxy.open_streams() == 0, "the proxy forgot the stream")
    ends = entries(proxy, "GetWorkItems", "response")
    assert [e.status for e in ends] == ["CANCELLED"] and "the worker closed the stream" in ends[0].summary
    assert proxy.cut_streams() == 0


def test_stopping_the_proxy_ends_worker_streams_and_t0_sets_the_clock(sidecar):
    proxy = FaultProxy.start(upstream=sidecar.address, t0=time.monotonic() - 100)
    worker = RawWorker(proxy.address)
    try:
        wait_for(lambda: proxy.open_streams() == 1, "the stream is open")
        proxy.stop()
        assert stream_status(worker)[0] == grpc.StatusCode.UNAVAILABLE
        assert all(e.t >= 100 for e in proxy.transcript())
        proxy.reset_transcript(t0=time.monotonic() - 50)
        assert proxy.transcript() == []
    finally:
        worker.cancel()


# --------------------------------------------------------------------------- counting and rule changes


def test_nth_counts_only_messages_that_match_rpc_direction_and_where(sidecar, make_proxy, make_client, workers,
                                                                     background):
    proxy = make_proxy(sidecar.address, [
        rule("CompleteActivityTask", "drop", where={"result": '"b"'}, nth=2),  # the 2nd completion with "b"
    ])
    client = make_client(proxy.address)
    worker = workers(proxy.address)
    start_with_activities(client, worker, background, "nth", "echo", "echo", "echo", "echo")
    acts = {a.activityRequest.taskId: a for a in (worker.next_activity() for _ in range(4))}
    for task_id, result in ((1, '"a"'), (2, '"b"'), (3, '"a"'), (4, '"b"')):
        worker.complete_activity(acts[task_id], result)
    applied: list[int] = []
    while len(applied) < 3:  # the completions reach the workflow in one or more turns
        turn = worker.next_workflow()
        applied += [e.taskCompleted.taskScheduledId for e in turn.workflowRequest.newEvents
                    if e.HasField("taskCompleted")]
        worker.answer(turn)
    assert sorted(applied) == [1, 2, 3]
    with pytest.raises(queue.Empty):  # task 4's completion was lost
        worker.next(timeout=0.3)
    assert [e.fault for e in entries(proxy, "CompleteActivityTask", "request")] == [None, None, None,
                                                                                    "drop (rule 0)"]
    assert [f.summary.split()[1] for f in proxy.fault_log()] == ["nth#4"]


def test_times_and_set_rules(sidecar, make_proxy, make_client):
    proxy = make_proxy(sidecar.address, [rule("GetInstance", "drop", times=None)])
    client = make_client(proxy.address)
    real = client.call("ListInstanceIDs", pb.ListInstanceIDsRequest(), timeout=5)
    assert real is not None
    for _ in range(3):  # every GetInstance is answered by the proxy with an empty response
        assert client.call("GetInstance", pb.GetInstanceRequest(instanceId="x"), timeout=5) == pb.GetInstanceResponse()
    assert len(proxy.fault_log()) == 3
    proxy.set_rules([rule("GetInstance", "drop", nth=2, times=2)])
    proxy.reset_transcript()
    for _ in range(4):
        client.call("GetInstance", pb.GetInstanceRequest(instanceId="x"), timeout=5)
    assert [e.fault for e in entries(proxy, "GetInstance", "request")] == [None, "drop (rule 0)", "drop (rule 0)",
                                                                          None]
    assert [f.rule_index for f in proxy.fault_log()] == [0, 0]
    with pytest.raises(InputError):
        proxy.set_rules([{"match": {"rpc": "GetInstance"}, "action": "drop"}])  # type: ignore[list-item]


# --------------------------------------------------------------------------- matching (no network)


def _activity_item(task_id: int, name: str = "echo", iid: str = "i-1") -> pb.WorkItem:
    item = pb.WorkItem(completionToken="tok")
    item.activityRequest.name = name
    item.activityRequest.taskId = task_id
    item.activityRequest.workflowInstance.instanceId = iid
    return item


def test_matching_walks_fields_defaults_wrappers_repeated_and_enums():
    item = _activity_item(0)
    assert MessageMatch(rpc="GetWorkItems", where={"activityRequest.taskId": 0}).matches(item)  # default value
    assert MessageMatch(rpc="GetWorkItems", where={"kind": "activity"}).matches(item)
    assert not MessageMatch(rpc="GetWorkItems", where={"kind": "workflow"}).matches(item)
    assert MessageMatch(rpc="GetWorkItems", where={"kind": ["workflow", "activity"]}).matches(item)
    assert MessageMatch(rpc="GetWorkItems", where={"activityRequest.workflowInstance.instanceId": "i-1"}).matches(item)
    assert not MessageMatch(rpc="GetWorkItems", where={"workflowRequest.instanceId": "i-1"}).matches(item)
    assert MessageMatch(rpc="GetWorkItems", where={"workflowRequest": None}).matches(item)
    assert MessageMatch(rpc="GetWorkItems", where={"activityRequest.input": None}).matches(item)

    resp = pb.ActivityResponse(instanceId="i-1", taskId=2)
    resp.result.value = '"x"'
    m = MessageMatch(rpc="CompleteActivityTask", where={"taskId": [1, 2], "result": '"x"'})
    assert m.direction == "request" and m.matches(resp)
    assert MessageMatch(rpc="CompleteActivityTask", where={"result.value": '"x"'}).matches(resp)
    assert not MessageMatch(rpc="CompleteActivityTask", where={"taskId": 3}).matches(resp)
    assert MessageMatch(rpc="CompleteActivityTask", where={"failureDetails": None}).matches(resp)

    turn = pb.WorkflowResponse(instanceId="i-1")
    turn.actions.extend([schedule(1, "a"), schedule(2, "b"), complete(3)])
    any_action = MessageMatch(rpc="CompleteWorkflowTask", where={"actions.scheduleTask.name": "b"})
    assert any_action.matches(turn)
    assert not MessageMatch(rpc="CompleteWorkflowTask", where={"actions.0.scheduleTask.name": "b"}).matches(turn)
    assert MessageMatch(rpc="CompleteOrchestratorTask",
                        where={"actions.completeWorkflow.workflowStatus": "ORCHESTRATION_STATUS_COMPLETED"}
                        ).matches(turn)
    assert MessageMatch(rpc="CompleteOrchestratorTask",
                        where={"actions.completeWorkflow.workflowStatus": pb.ORCHESTRATION_STATUS_COMPLETED}
                        ).matches(turn)

    start = pb.CreateInstanceRequest(instanceId="s", tags={"team": "a"})
    assert MessageMatch(rpc="StartInstance", where={"tags.team": "a"}).matches(start)
    assert not MessageMatch(rpc="StartInstance", where={"tags.other": "a"}).matches(start)
    assert MessageMatch(rpc="StartInstance", direction="response", where={"instanceId": "s"}).matches(
        pb.CreateInstanceResponse(instanceId="s"))
    # The Dapr runtime API's snake_case fields take their JSON names too.
    from taskhub_wire import rt

    assert MessageMatch(rpc="StartWorkflowBeta1", where={"instanceId": "w"}).matches(
        rt.StartWorkflowRequest(instance_id="w"))
    assert not MessageMatch(rpc="GetWorkItems", where={"kind": "activity"}).matches(None)
    assert MessageMatch(rpc="GetWorkItems").matches(None)


# --------------------------------------------------------------------------- validation


def test_parse_rules_accepts_plain_data_with_durations():
    rules = parse_rules([
        {"match": {"rpc": "CompleteActivityTask", "where": {"taskId": 2}, "nth": 1}, "action": "replay_later"},
        {"match": {"rpc": "GetWorkItems", "where": {"kind": "activity"}}, "action": "delay", "delay_s": "250ms"},
        {"match": {"rpc": "CompleteActivityTask"}, "action": "replay_later", "replay_after_s": "1.5s",
         "times": None, "forward_now": True},
    ], source="scenarios/x.yaml faults")
    assert rules[0] == FaultRule(match=MessageMatch(rpc="CompleteActivityTask", where={"taskId": 2}, nth=1),
                                 action="replay_later")
    assert rules[1].match.direction == "item" and rules[1].delay_s == 0.25
    assert rules[2].replay_after_s == 1.5 and rules[2].times is None and rules[2].forward_now
    assert not rules[0].forward_now
    assert parse_rules(None, source="s") == () and parse_rules([], source="s") == ()
    assert "replay_later" in rules[0].describe() and "taskId=2" in rules[0].describe()


def test_parse_rules_reports_every_problem_with_its_index():
    with pytest.raises(InputError) as err:
        parse_rules([
            {"match": {"rpc": "CompleteActivityTsk"}, "action": "drop"},
            {"match": {"rpc": "CompleteActivityTask", "where": {"taskid": 2, "result": 5}}, "action": "explode"},
            {"match": {"rpc": "GetWorkItems", "direction": "response", "nth": 0}, "action": "drop", "times": 0},
            {"match": {"rpc": "CompleteActivityTask", "direction": "response"}, "action": "duplicate"},
            {"match": {"rpc": "GetWorkItems"}, "action": "delay"},
            {"match": {"rpc": "GetWorkItems", "where": {"kind": "entity"}}, "action": "drop", "colour": "red"},
            {"action": "drop"},
            "drop everything",
            {"match": {"rpc": "CompleteActivityTask"}, "action": "drop", "replay_after_s": 1},
            {"match": {"rpc": "StartInstance", "where": {"input.nope": "x"}}, "action": "drop"},
            {"match": {"rpc": "Hello"}, "action": "drop", "forward_now": True},
        ], source="s.yaml")
    problems = [p.what for p in err.value.problems]
    text = str(err.value)
    assert isinstance(err.value, ValueError) and text.startswith(f"{len(problems)} problems in fault rules:")

    def at(i: int) -> list[str]:
        return [p for p in problems if p.startswith(f"s.yaml[{i}]")]

    assert "unknown rpc 'CompleteActivityTsk'; known: Hello," in at(0)[0]
    assert any("unknown field 'taskid' in ActivityResponse; known: instanceId, taskId" in p for p in at(1))
    assert any("result" in p and "got 5" in p for p in at(1))
    assert any("unknown action 'explode'; known: drop, duplicate" in p for p in at(1))
    assert any("match.direction" in p and "use one of: request, item" in p for p in at(2))
    assert any("match.nth" in p for p in at(2)) and any(".times:" in p for p in at(2))
    assert any("duplicate does not apply to CompleteActivityTask responses" in p for p in at(3))
    assert any("delay needs delay_s > 0" in p for p in at(4))
    assert any("unknown work item kind 'entity'" in p for p in at(5))
    assert any("unknown key 'colour'" in p for p in at(5))
    assert any(".match:" in p and "missing" in p for p in at(6))
    assert any("a fault rule is a mapping" in p for p in at(7))
    assert any("replay_after_s is only used by action replay_later" in p for p in at(8))
    assert any("StringValue only has 'value', not 'nope'" in p for p in at(9))
    assert any("forward_now is only used by action replay_later" in p for p in at(10))
    assert all(at(i) for i in range(11))

    with pytest.raises(InputError, match="a list of mappings"):
        parse_rules({"match": {}}, source="s.yaml")


def test_constructing_a_bad_rule_directly_raises():
    with pytest.raises(InputError, match="unknown rpc 'Nope'"):
        MessageMatch(rpc="Nope")
    with pytest.raises(InputError, match="taskId is an integer, got '2'"):
        MessageMatch(rpc="CompleteActivityTask", where={"taskId": "2"})
    with pytest.raises(InputError, match="times must be"):
        FaultRule(match=MessageMatch(rpc="Hello"), action="drop", times=-1)
    with pytest.raises(InputError, match="use one of: delay, cut_stream"):
        FaultRule(match=MessageMatch(rpc="GetWorkItems", direction="request"), action="drop")


def test_a_completion_counts_as_done_for_routing_only_after_the_engine_had_it(proxy, make_client, monkeypatch):
    # The stream that carried a routed item may linger for it alone; ending it before the engine has
    # the completion makes daprd cancel the item and dispatch it again (seen on a shared daprd).
    order: list[str] = []
    upstream, completed = proxy._call_upstream, proxy._router.completed
    monkeypatch.setattr(proxy, "_call_upstream", lambda *a, **k: (order.append("upstream"), upstream(*a, **k))[1])
    monkeypatch.setattr(proxy._router, "completed", lambda key: (order.append("completed"), completed(key))[1])
    client = make_client(proxy.address)
    client.call("CompleteActivityTask", pb.ActivityResponse(instanceId="nobody", taskId=1), timeout=5)
    assert order == ["upstream", "completed"]
