"""Hostile conditions against the reference sidecar (issue 11): oversized messages, forged tokens,
stream floods. Each test repeats an attack that once hung, froze or fooled the sidecar.
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

from fake_sidecar.__main__ import build_parser
from fake_sidecar.engine.model import WorkRef
from fake_sidecar.engine.refusals import REFUSABLE_BYTES, REFUSALS, RefusalTracker
from taskhub_wire.limits import DEFAULT_MAX_MESSAGE_BYTES
from fake_sidecar.server import SidecarServer
from fake_worker.activities import ActivityRunner
from fake_worker.client import Worker, WorkerOptions
from taskhub_programs import parse_bundle
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient
from tests.sidecar.rawworker import RawWorker, complete, schedule
from tests.waiting import wait_for

# The client may send any size: the sidecar, not the client, must refuse.
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


@pytest.fixture
def big_client(sidecar: SidecarServer) -> Iterator[TaskHubClient]:
    channel = grpc.insecure_channel(sidecar.address, options=UNLIMITED)
    try:
        yield TaskHubClient(channel)
    finally:
        channel.close()


# ----------------------------------------------------------------------------- message size

def test_default_message_limit_is_daprds_max_body_size():
    assert DEFAULT_MAX_MESSAGE_BYTES == 4 * 1024 * 1024


@pytest.mark.parametrize("megabytes", [5, 10])
def test_oversized_start_instance_is_refused_at_once(sidecar, big_client, megabytes):
    req = pb.CreateInstanceRequest(instanceId="huge", name="W")
    req.input.value = json.dumps("x" * (megabytes * 1_000_000))
    # Before the limit the sidecar stored it and waited for a worker until the deadline.
    with pytest.raises(grpc.RpcError) as err:
        big_client.call("StartInstance", req, timeout=120)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value.details()
    assert str(DEFAULT_MAX_MESSAGE_BYTES) in err.value.details()
    assert not big_client.call("GetInstance", pb.GetInstanceRequest(instanceId="huge"), timeout=10).exists


def test_cli_takes_max_message_bytes(capsys):
    assert build_parser().parse_args([]).max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES
    assert build_parser().parse_args(["--max-message-bytes", "1000"]).max_message_bytes == 1000
    for bad in ("0", "-1", "4Mi"):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["--max-message-bytes", bad])
        assert exit_.value.code == 2 and "--max-message-bytes" in capsys.readouterr().err
    assert build_parser().parse_args(["--strict-tokens"]).strict_tokens
    assert not build_parser().parse_args([]).strict_tokens


GROWING = parse_bundle({"programs": {"grow": {"steps": [
    {"call_activity": {"name": "echo", "input": "${input}"}, "as": "a"},
    {"call_activity": {"name": "echo", "input": "${a}"}},
    {"return": "done"},
]}}})


def test_history_over_the_limit_stalls_instead_of_looping(sidecar, big_client, caplog):
    """Each message fits, but the history outgrows 4 MiB: the sidecar stalls the instance with a
    message naming the size and the flag, instead of sending a turn the worker must refuse
    (it used to be refused and sent again on every reconnect, 116 times in 30 s)."""
    worker = Worker(bundle=GROWING, options=WorkerOptions(sidecar=sidecar.address), activities=ActivityRunner())
    thread = threading.Thread(target=worker.run, name="reference-worker", daemon=True)
    thread.start()
    caplog.set_level(logging.WARNING, logger="fake_sidecar")
    try:
        assert worker.connected_once.wait(15), "the reference worker did not connect"
        req = pb.CreateInstanceRequest(instanceId="grow", name="grow")
        req.input.value = json.dumps("y" * 1_500_000)
        big_client.call("StartInstance", req, timeout=60)

        def stalled() -> bool:
            view = big_client.call("GetInstance", pb.GetInstanceRequest(instanceId="grow"), timeout=10)
            return view.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_STALLED

        wait_for(stalled, "the stall of the oversized workflow")
        history = big_client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="grow"),
                                  timeout=10).events
        desc = history[-1].executionStalled.description
        assert history[-1].executionStalled.reason == pb.PAYLOAD_SIZE_EXCEEDED
        assert f"max gRPC body size {DEFAULT_MAX_MESSAGE_BYTES} bytes" in desc and "--max-message-bytes" in desc
        assert [r for r in caplog.records if r.levelno == logging.WARNING and "--max-message-bytes" in r.getMessage()]
        # No turn was sent and lost: the work item never went out.
        assert sidecar.engine.counters.abandoned_turns == 0
    finally:
        worker.stop()
        thread.join(timeout=15)


# ----------------------------------------------------------------------------- forged completions

def _forge_and_finish(srv: SidecarServer) -> tuple[str, object]:
    """A genuine worker runs one activity; a second client answers the same work with an empty token
    first. Returns the instance output and the engine's counters."""


    channel = grpc.insecure_channel(srv.address)
    forger = TaskHubClient(channel)
    worker = RawWorker(srv.address)
    try:
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(forger.call, "StartInstance", pb.CreateInstanceRequest(instanceId="t", name="W"),
                                  timeout=30)
            worker.answer(worker.next_workflow(), schedule(1, "A", '"in"'))
            started.result(timeout=30)
        act = worker.next_activity()
        forged = pb.ActivityResponse(instanceId="t", taskId=act.activityRequest.taskId, completionToken="")
        forged.result.value = '"forged"'
        forger.call("CompleteActivityTask", forged, timeout=10)  # answered OK either way
        if srv.engine.counters.zombie_activity == 0:
            turn = worker.next_workflow()  # the forged result was applied
        else:
            worker.complete_activity(act, '"genuine"')
            turn = worker.next_workflow()
        pwned = pb.WorkflowResponse(instanceId="t", completionToken="")
        pwned.actions.append(complete(2, '"pwned"'))
        forger.call("CompleteOrchestratorTask", pwned, timeout=10)
        if srv.engine.counters.zombie_turn:
            worker.answer(turn, complete(2, '"ok"'))
        done = forger.call("WaitForInstanceCompletion",
                           pb.GetInstanceRequest(instanceId="t", getInputsAndOutputs=True), timeout=30)
        return done.workflowState.output.value, srv.engine.counters
    finally:
        worker.cancel()
        channel.close()


def test_strict_tokens_ignore_an_empty_token_like_a_stale_one(caplog):
    srv = SidecarServer.start(port=0, db=":memory:", strict_tokens=True)
    caplog.set_level(logging.WARNING, logger="fake_sidecar")
    try:
        output, counters = _forge_and_finish(srv)
    finally:
        srv.stop()
    assert output == '"ok"'
    assert (counters.zombie_activity, counters.zombie_turn) == (1, 1)
    assert [r for r in caplog.records if "without a completionToken" in r.getMessage()]


def test_by_default_an_empty_token_is_accepted_as_both_real_engines_do():
    srv = SidecarServer.start(port=0, db=":memory:")
    try:
        output, counters = _forge_and_finish(srv)
    finally:
        srv.stop()
    assert output == '"pwned"'
    assert (counters.zombie_activity, counters.zombie_turn) == (0, 0)


def test_a_non_ascii_token_is_ignored_not_an_internal_error(sidecar):
    channel = grpc.insecure_channel(sidecar.address)
    client = TaskHubClient(channel)
    worker = RawWorker(sidecar.address)
    try:
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(client.call, "StartInstance", pb.CreateInstanceRequest(instanceId="u", name="W"),
                                  timeout=30)
            turn = worker.next_workflow()
            worker.answer(turn, complete(1, '"x"'), token="zombie-\u00e9\u4e2d")
            assert sidecar.engine.counters.zombie_turn == 1
            worker.answer(turn, complete(1, '"x"'))
            started.result(timeout=30)
    finally:
        worker.cancel()
        channel.close()


def test_api_token_refuses_near_misses():
    srv = SidecarServer.start(port=0, db=":memory:", api_token="secret")
    channel = grpc.insecure_channel(srv.address)
    try:
        for metadata in ((), (("dapr-api-token", "secreT"),), (("dapr-api-token", "secret-and-more"),)):
            with pytest.raises(grpc.RpcError) as err:
                TaskHubClient(channel, metadata=metadata).call("Hello", empty_pb2.Empty(), timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        TaskHubClient(channel, metadata=(("dapr-api-token", "secret"),)).call("Hello", empty_pb2.Empty(), timeout=10)
    finally:
        channel.close()
        srv.stop()


# ----------------------------------------------------------------------------- stream floods

def test_a_thousand_idle_streams_do_not_freeze_the_sidecar(sidecar):
    """Each stream used to hold one of 512 threads: 530 idle streams and Hello timed out.
    (bench/stream_flood.py measures the latency; this test only asks for an answer.)"""


    flood = grpc.insecure_channel(sidecar.address)
    channel = grpc.insecure_channel(sidecar.address)
    client = TaskHubClient(channel)
    streams = []
    try:
        open_stream = flood.unary_stream("/TaskHubSidecarService/GetWorkItems")
        streams = [open_stream(pb.GetWorkItemsRequest().SerializeToString()) for _ in range(1000)]
        wait_for(lambda: sidecar.engine.connected_streams() >= 1000, "1,000 open streams", timeout=120)
        client.call("Hello", empty_pb2.Empty(), timeout=30)
        assert not client.call("GetInstance", pb.GetInstanceRequest(instanceId="none"), timeout=30).exists
        for call in streams:
            call.cancel()
        wait_for(lambda: sidecar.engine.connected_streams() == 0, "the streams to close", timeout=120)
        # The cancelled streams left nothing wedged: the next worker gets the next turn.
        worker = RawWorker(sidecar.address)
        try:
            with ThreadPoolExecutor(1) as pool:
                started = pool.submit(client.call, "StartInstance", pb.CreateInstanceRequest(instanceId="f", name="W"),
                                      timeout=60)
                worker.answer(worker.next_workflow(timeout=60), complete(1, '"ok"'))
                started.result(timeout=60)
        finally:
            worker.cancel()
    finally:
        for call in streams:
            call.cancel()
        flood.close()
        channel.close()


def test_a_work_item_the_worker_keeps_refusing_is_held_back():
    """The sidecar allows 16 MiB, the reference worker receives 4 MiB (gRPC's default): a 5 MB
    turn ends the worker's stream each time. It is sent a few times, then the instance stalls with
    a message naming the size and the flags, instead of being sent again on every reconnect."""
    srv = SidecarServer.start(port=0, db=":memory:", max_message_bytes=16 * 1024 * 1024)
    worker = Worker(bundle=GROWING, options=WorkerOptions(sidecar=srv.address), activities=ActivityRunner())
    thread = threading.Thread(target=worker.run, name="reference-worker", daemon=True)
    thread.start()
    channel = grpc.insecure_channel(srv.address, options=UNLIMITED)
    client = TaskHubClient(channel)
    try:
        assert worker.connected_once.wait(15), "the reference worker did not connect"
        req = pb.CreateInstanceRequest(instanceId="refused", name="grow")
        req.input.value = json.dumps("z" * 5_000_000)
        # StartInstance returns once the instance is no longer PENDING: here, once it stalls.
        client.call("StartInstance", req, timeout=120)
        view = client.call("GetInstance", pb.GetInstanceRequest(instanceId="refused"), timeout=10)
        assert view.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_STALLED
        stalled = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="refused"),
                              timeout=10).events[-1].executionStalled
        assert stalled.reason == pb.PAYLOAD_SIZE_EXCEEDED
        assert "--max-message-bytes" in stalled.description and "worker refuses" in stalled.description
        lost = srv.engine.counters.abandoned_turns
        assert lost == 3
        # A new stream (here one that could take it) does not bring the item back: the first
        # item it gets is the turn of an instance started after it connected.
        worker.stop()
        thread.join(timeout=15)
        wait_for(lambda: srv.engine.connected_streams() == 0, "the worker's stream to close")
        stream = channel.unary_stream("/TaskHubSidecarService/GetWorkItems")(b"")
        wait_for(lambda: srv.engine.connected_streams() == 1, "the new stream")


        with ThreadPoolExecutor(1) as pool:
            probe = pool.submit(client.call, "StartInstance", pb.CreateInstanceRequest(instanceId="probe", name="grow"),
                                timeout=30)
            first = pb.WorkItem.FromString(next(stream))
            answer = pb.WorkflowResponse(instanceId="probe", completionToken=first.completionToken)
            answer.actions.append(complete(1, '"ok"'))
            client.call("CompleteOrchestratorTask", answer, timeout=10)
            probe.result(timeout=30)
            stream.cancel()
        assert srv.engine.counters.abandoned_turns == lost
        assert first.workflowRequest.instanceId == "probe"
        events = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="refused"),
                             timeout=10).events
        assert sum(e.HasField("executionStalled") for e in events) == 1
    finally:
        worker.stop()
        thread.join(timeout=15)
        channel.close()
        srv.stop()


def test_small_items_lost_again_and_again_are_always_redelivered():
    """Worker kills lose small items: those must be redelivered however often it happens."""

    tracker = RefusalTracker()
    key = WorkRef.turn("i")
    for _ in range(REFUSALS * 3):
        assert tracker.dispatching(key, 1000, limit=None) is None
        tracker.lost(key)
    big = REFUSABLE_BYTES + 1
    for _ in range(REFUSALS):
        assert tracker.dispatching(key, big, limit=None) is None
        tracker.lost(key)
    assert "dispatched 3 times" in (tracker.dispatching(key, big, limit=None) or "")
    tracker.answered(key)
    assert tracker.dispatching(key, big, limit=None) is None


def test_the_sidecar_process_lifts_its_open_files_limit(tmp_path):
    """A thousand workers are a thousand connections: a soft limit of 1024 must not cap them."""

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.fail(f"this machine's hard open-files limit is {hard}; the test needs more than 256")
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p))
    env.pop("DAPR_API_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_sidecar", "--port", "0", "--db", ":memory:"], cwd=repo, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on ")
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        soft = re.search(r"^Max open files\s+(\S+)", limits, re.M).group(1)
        assert soft != "256" and (soft == "unlimited" or int(soft) > 256), limits
    finally:
        proc.terminate()
        proc.wait(timeout=30)
