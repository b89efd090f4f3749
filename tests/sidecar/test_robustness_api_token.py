"""Robustness: a sidecar started with an API token refuses every RPC without the right
`dapr-api-token` metadata (UNAUTHENTICATED, naming the header) and serves normally with it.

Covers every unary method of both tables and GetWorkItems, missing and wrong tokens (and a
garbage payload, which must not be decoded before the caller is authenticated), the happy
path (Hello and a whole workflow through a RawWorker carrying the token), and the command:
`DAPR_API_TOKEN` in the environment, and `--api-token` taking precedence over it.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, Kind, Method, TaskHubClient
from tests.sidecar.rawworker import RawWorker, complete, schedule

TOKEN = "s3cret"
HEADER = "dapr-api-token"
GOOD = ((HEADER, TOKEN),)
METHODS: list[Method] = [m for table in (TASKHUB, DAPR_WORKFLOW) for m in table.methods.values()]
REPO = Path(__file__).resolve().parents[2]

BAD_METADATA = {
    "none": (),
    "wrong": ((HEADER, "wrong"),),
    "empty": ((HEADER, ""),),
    "prefix": ((HEADER, TOKEN[:-1]),),
    "longer": ((HEADER, TOKEN + "x"),),
    "padded": ((HEADER, f" {TOKEN} "),),
    "case": ((HEADER, TOKEN.upper()),),
    "other-header": (("authorization", f"Bearer {TOKEN}"),),
    "bin-header": (("dapr-api-token-bin", TOKEN.encode()),),
}


@pytest.fixture
def secured() -> Iterator[SidecarServer]:
    srv = SidecarServer.start(port=0, db=":memory:", api_token=TOKEN)
    try:
        yield srv
    finally:
        srv.stop()


def _call(channel: grpc.Channel, method: Method, payload: bytes, metadata, timeout: float = 5.0) -> None:
    if method.kind is Kind.SERVER_STREAM:
        for _ in channel.unary_stream(method.path)(payload, metadata=metadata, timeout=timeout):
            pass
    else:
        channel.unary_unary(method.path)(payload, metadata=metadata, timeout=timeout)


def _valid_payload(method: Method) -> bytes:
    """A request that would do something if it were let through."""
    req = method.request()
    for name, value in (("instanceId", "tok-x"), ("instance_id", "tok-x"), ("name", "W"),
                        ("workflow_name", "W"), ("event_name", "e"), ("sourceInstanceID", "tok-x")):
        if name in req.DESCRIPTOR.fields_by_name:
            setattr(req, name, value)
    return req.SerializeToString()


@pytest.mark.parametrize("bad", list(BAD_METADATA), ids=list(BAD_METADATA))
@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_every_rpc_refuses_a_missing_or_wrong_token(secured: SidecarServer, method: Method, bad: str) -> None:
    with grpc.insecure_channel(secured.address) as channel:
        for payload in (_valid_payload(method), b"\xff\xff\xff garbage"):
            with pytest.raises(grpc.RpcError) as err:
                _call(channel, method, payload, BAD_METADATA[bad])
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, (
                f"{method.path} with {bad} token -> {err.value.code().name}: {err.value.details()}")
            assert HEADER in (err.value.details() or ""), err.value.details()
            assert TOKEN not in (err.value.details() or ""), "the error message leaks the expected token"
    # Nothing got in: no stream was opened and no instance created.
    assert secured.engine.connected_streams() == 0
    assert list(secured.engine.instance_ids()) == []


def test_right_token_serves_hello_and_a_workflow(secured: SidecarServer) -> None:
    channel = grpc.insecure_channel(secured.address)
    client = TaskHubClient(channel, metadata=GOOD)
    pool = ThreadPoolExecutor(max_workers=2)
    worker = RawWorker(secured.address, metadata=GOOD)
    try:
        client.call("Hello", empty_pb2.Empty(), timeout=5)
        req = pb.CreateInstanceRequest(instanceId="tok-1", name="W")
        req.input.value = "1"
        started = pool.submit(client.call, "StartInstance", req, timeout=10)
        worker.answer(worker.next_workflow(), schedule(1, "A", "1"))
        assert started.result(timeout=10).instanceId == "tok-1"
        worker.complete_activity(worker.next_activity(), "2")
        worker.answer(worker.next_workflow(), complete(2, "2"))
        done = client.call("WaitForInstanceCompletion",
                           pb.GetInstanceRequest(instanceId="tok-1", getInputsAndOutputs=True), timeout=10)
        assert done.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED
        assert done.workflowState.output.value == "2"
        # The same channel without the header is still refused: the check is per call.
        with pytest.raises(grpc.RpcError) as err:
            TaskHubClient(channel).call("GetInstance", pb.GetInstanceRequest(instanceId="tok-1"), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        worker.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        channel.close()


def test_refused_calls_change_nothing(secured: SidecarServer) -> None:
    """A StartInstance/RaiseEvent/Purge with a wrong token has no effect at all."""
    channel = grpc.insecure_channel(secured.address)
    good = TaskHubClient(channel, metadata=GOOD)
    bad = TaskHubClient(channel, metadata=((HEADER, "nope"),))
    try:
        req = pb.CreateInstanceRequest(instanceId="tok-2", name="W")
        req.scheduledStartTimestamp.seconds = int(time.time()) + 3600  # returns at once when allowed
        with pytest.raises(grpc.RpcError) as err:
            bad.call("StartInstance", req, timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert not good.call("GetInstance", pb.GetInstanceRequest(instanceId="tok-2"), timeout=5).exists
        good.call("StartInstance", req, timeout=5)
        for name, msg in (("RaiseEvent", pb.RaiseEventRequest(instanceId="tok-2", name="e")),
                          ("PurgeInstances", pb.PurgeInstancesRequest(instanceId="tok-2", force=True)),
                          ("TerminateInstance", pb.TerminateRequest(instanceId="tok-2"))):
            with pytest.raises(grpc.RpcError) as err:
                bad.call(name, msg, timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, name
        state = good.call("GetInstance", pb.GetInstanceRequest(instanceId="tok-2"), timeout=5)
        assert state.exists and state.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_PENDING
    finally:
        channel.close()


def test_without_a_token_configured_metadata_is_ignored(sidecar: SidecarServer) -> None:
    with grpc.insecure_channel(sidecar.address) as channel:
        TaskHubClient(channel).call("Hello", empty_pb2.Empty(), timeout=5)
        TaskHubClient(channel, metadata=((HEADER, "anything"),)).call("Hello", empty_pb2.Empty(), timeout=5)


# ----------------------------------------------------------------------------- the command

class Proc:
    """`python -m fake_sidecar` as a child process; ended by pid in `stop`."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "fake_sidecar", "--host", "127.0.0.1", "--port", "0", *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        try:
            line = self.lines.get(timeout=30)
            assert line.startswith("listening on "), line
        except BaseException:
            self.stop()
            raise
        self.address = line.removeprefix("listening on ").strip()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        if self.popen.stderr is not None:
            self.popen.stderr.close()


def _env(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DAPR_API_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if token is not None:
        env["DAPR_API_TOKEN"] = token
    return env


def _hello(address: str, metadata=()) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        try:
            TaskHubClient(channel, metadata=metadata).call("Hello", empty_pb2.Empty(), timeout=5)
            return grpc.StatusCode.OK
        except grpc.RpcError as exc:
            return exc.code()


def test_command_reads_dapr_api_token_from_the_environment(tmp_path: Path) -> None:
    proc = Proc(["--db", str(tmp_path / "s.db")], _env(TOKEN))
    try:
        assert _hello(proc.address) == grpc.StatusCode.UNAUTHENTICATED
        assert _hello(proc.address, ((HEADER, "wrong"),)) == grpc.StatusCode.UNAUTHENTICATED
        assert _hello(proc.address, GOOD) == grpc.StatusCode.OK
        with grpc.insecure_channel(proc.address) as channel:
            with pytest.raises(grpc.RpcError) as err:
                list(channel.unary_stream(TASKHUB.method("GetWorkItems").path)(b"", timeout=5))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert HEADER in (err.value.details() or "")
    finally:
        proc.stop()
    assert proc.popen.returncode == 0


def test_command_api_token_flag_overrides_the_environment(tmp_path: Path) -> None:
    proc = Proc(["--db", str(tmp_path / "s.db"), "--api-token", "from-flag"], _env("from-env"))
    try:
        assert _hello(proc.address, ((HEADER, "from-env"),)) == grpc.StatusCode.UNAUTHENTICATED
        assert _hello(proc.address, ((HEADER, "from-flag"),)) == grpc.StatusCode.OK
    finally:
        proc.stop()


def test_command_without_a_token_is_open(tmp_path: Path) -> None:
    proc = Proc(["--db", str(tmp_path / "s.db")], _env(None))
    try:
        assert _hello(proc.address) == grpc.StatusCode.OK
    finally:
        proc.stop()
