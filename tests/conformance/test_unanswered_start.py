"""A StartInstance the sidecar does not answer in time is an ERROR (the sidecar or the machine is too slow),
not a FAILED verdict on the worker: the sidecar answers it without the worker. Another call that times out
stays the step's failure."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import pytest

from conformance.runner.harness import Client, HarnessError, Where, call_rpc
from conformance.failures import TargetMisbehaved
from taskhub_wire import pb


class _Silent(grpc.GenericRpcHandler):
    """A real gRPC server that takes every call and answers none before its deadline."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def service(self, handler_call_details):
        def hold(request, context):
            while context.is_active() and not self.released.is_set():
                time.sleep(0.01)
            context.abort(grpc.StatusCode.CANCELLED, "released")

        return grpc.unary_unary_rpc_method_handler(hold)


@pytest.fixture
def silent_client():
    handler = _Silent()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield Client(address=f"127.0.0.1:{port}", metadata=(), began=time.monotonic())
    finally:
        handler.released.set()
        server.stop(grace=None)


def test_an_unanswered_start_is_an_error_naming_the_sidecar(silent_client):
    req = pb.CreateInstanceRequest(instanceId="i", name="main")
    with pytest.raises(HarnessError, match=r"start main: the sidecar did not answer StartInstance within 0.3 s"):
        call_rpc(None, silent_client, "StartInstance", req, expect=None, where=Where("s.yaml:3", "start main"),
                 timeout=0.3, without_worker=True)


def test_another_unanswered_call_stays_the_steps_failure(silent_client):
    req = pb.RaiseEventRequest(instanceId="i", name="e")
    with pytest.raises(TargetMisbehaved, match="RaiseEvent failed: DEADLINE_EXCEEDED"):
        call_rpc(None, silent_client, "RaiseEvent", req, expect=None, where=Where("s.yaml:4", "raise e"), timeout=0.3)


def test_a_read_of_the_outcome_left_unanswered_is_one_line_naming_the_call(silent_client):
    """The harness's own GetInstance after the steps (observe) timed out: an ERROR in one line, no traceback."""
    from types import SimpleNamespace

    from conformance.runner.execute import unanswered

    with pytest.raises(grpc.RpcError) as caught:
        silent_client.call("GetInstance", pb.GetInstanceRequest(instanceId="wf-1"), timeout=0.3)
    text = unanswered(caught.value, SimpleNamespace(clients={"": silent_client}), sidecar="daprd")
    assert text.startswith("HarnessError: the sidecar daprd did not answer GetInstance of instance wf-1"), text
    assert "DEADLINE_EXCEEDED" in text and "\n" not in text and "Traceback" not in text
    assert "too slow or stuck" in text


class _Failing(grpc.GenericRpcHandler):
    """A real gRPC server that answers every call at once with an error of its own (daprd's words)."""

    def service(self, handler_call_details):
        def fail(request, context):
            context.abort(grpc.StatusCode.UNKNOWN, "workflow 'wf-1': inbox key 'inbox-000000' declared in metadata "
                                                   "(inboxLength=1) but missing from state store")

        return grpc.unary_unary_rpc_method_handler(fail)


def test_a_read_the_engine_refused_is_not_called_slow():
    from types import SimpleNamespace

    from conformance.runner.execute import unanswered

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[_Failing()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        client = Client(address=f"127.0.0.1:{port}", metadata=(), began=time.monotonic())
        with pytest.raises(grpc.RpcError) as caught:
            client.call("GetInstance", pb.GetInstanceRequest(instanceId="wf-1"), timeout=5)
        text = unanswered(caught.value, SimpleNamespace(clients={"": client}), sidecar="daprd")
    finally:
        server.stop(grace=None)
    assert "UNKNOWN: workflow 'wf-1': inbox key" in text, text
    assert "an error of its own" in text and "too slow" not in text, text
