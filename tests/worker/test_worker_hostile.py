"""The reference worker under hostile conditions: a stream that breaks with work in flight, work
items bigger than gRPC's 4 MB default, an empty work item, a history with two ExecutionStarted.

The sidecar is the in-process reference sidecar (or, for the empty work item, a bare gRPC server
that sends one); the worker runs in a thread of this process so that its log can be read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from fake_worker.activities import ActivityRunner
from fake_worker.client import Worker, WorkerOptions
from taskhub_programs import parse_bundle
from fake_worker.replay import execute
from taskhub_wire import pb
from taskhub_wire.rpc import TASKHUB, TaskHubClient
from tests.worker import histories as h
from tests.waiting import wait_for

BUNDLE = parse_bundle({"programs": {
    "gated": {"steps": [{"call_activity": {"name": "gate", "input": "x"}, "as": "r"}, {"return": "${r}"}]},
    "echo_input": {"steps": [{"call_activity": {"name": "echo", "input": "${input}"}, "as": "r"},
                             {"return": "done"}]},
    "ignore_input": {"steps": [{"return": "done"}]},
}})


class GatedRunner(ActivityRunner):
    """`gate` blocks until released and counts its runs; every other activity is the built-in one."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.runs = 0

    def run(self, *, name: str, input: Any, **kw: Any) -> Any:
        if name != "gate":
            return super().run(name=name, input=input, **kw)
        self.runs += 1
        self.entered.release()
        assert self.release.wait(30), "the test never released the gate"
        return input


class RunningWorker:
    def __init__(self, address: str, **options: Any) -> None:
        self.runner = GatedRunner()
        self.worker = Worker(bundle=BUNDLE, options=WorkerOptions(sidecar=address, **options), activities=self.runner)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.worker.connected_once.wait(10), "the worker did not connect"

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def stop(self) -> None:
        self.runner.release.set()
        self.worker.stop()
        self.thread.join(15)
        assert not self.thread.is_alive(), "the worker did not stop"
        assert self.error is None, f"the worker's run() raised {self.error!r}"


@pytest.fixture
def sidecar() -> Iterator[SidecarServer]:
    # Allowed to send more than the worker's default, so the worker's own limit is what is tested.
    srv = SidecarServer.start(port=0, db=":memory:", max_message_bytes=16 * 2**20)
    try:
        yield srv
    finally:
        srv.stop()


def _start(address: str, iid: str, name: str, input: str | None = None, timeout: float = 20) -> None:
    with grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 * 2**20)]) as ch:
        req = pb.CreateInstanceRequest(instanceId=iid, name=name)
        if input is not None:
            req.input.value = input
        TaskHubClient(ch).call("StartInstance", req, timeout=timeout)


def _start_later(address: str, iid: str, name: str, **kw: Any) -> None:
    """StartInstance from a thread; it may end with an error when the test stops the sidecar."""
    def call() -> None:
        try:
            _start(address, iid, name, **kw)
        except grpc.RpcError:
            pass

    threading.Thread(target=call, daemon=True).start()


def _status(srv: SidecarServer, iid: str) -> int | None:
    view = srv.engine.get_instance(iid)
    return None if view is None else view.status


def _problems(records: list[logging.LogRecord]) -> list[str]:
    return [f"{r.levelname} {r.getMessage()}" for r in records
            if r.name.startswith("fake_worker") and (r.exc_info or r.levelno >= logging.ERROR
                                                     or "closed channel" in r.getMessage())]


def test_a_result_finished_after_the_stream_broke_is_delivered_after_reconnecting(sidecar, caplog) -> None:
    """Issue 11 #5: run() closed the channel while the pool still used it ("Cannot invoke RPC on
    closed channel!", a traceback, the result lost). Now the late result reaches the engine, which
    ignores it by its token (the activity was dispatched again), and the instance completes."""
    caplog.set_level(logging.INFO)
    w = RunningWorker(sidecar.address)
    try:
        _start_later(sidecar.address, "cut", "gated")
        assert w.runner.entered.acquire(timeout=20), "the gate activity never ran"
        with w.worker._lock:
            assert w.worker._call is not None
            w.worker._call.cancel()  # the stream breaks while the activity runs
        # The engine dispatches it again on the new stream; that run waits at the gate too.
        assert w.runner.entered.acquire(timeout=20), "the activity was not dispatched again after the cut"
        w.runner.release.set()
        wait_for(lambda: _status(sidecar, "cut") == pb.ORCHESTRATION_STATUS_COMPLETED, "the instance to complete")
        counters = sidecar.engine.counters
        wait_for(lambda: counters.zombie_activity + counters.unknown_activity >= 1,
              "the first run's result to reach the engine")
    finally:
        w.stop()
    assert w.runner.runs == 2
    assert not _problems(caplog.records), _problems(caplog.records)


def test_a_result_the_sidecar_did_not_receive_is_sent_again_after_reconnecting(tmp_path, caplog) -> None:
    """The sidecar stops while an activity runs; the result cannot be sent; the sidecar comes back on
    the same port and db; the kept result is sent then (the engine ignores its old token), no traceback."""
    caplog.set_level(logging.INFO)
    db = str(tmp_path / "s.db")
    srv = SidecarServer.start(port=0, db=db)
    port = srv.port
    w = RunningWorker(srv.address)
    try:
        _start_later(srv.address, "down", "gated", timeout=5)
        assert w.runner.entered.acquire(timeout=20), "the gate activity never ran"
        srv.stop()
        w.runner.release.set()
        wait_for(lambda: any("keeping it to send again" in r.getMessage() for r in caplog.records),
              "the worker to keep the result it could not send")
        srv = SidecarServer.start(port=port, db=db)
        counters = srv.engine.counters
        wait_for(lambda: counters.zombie_activity + counters.unknown_activity >= 1, "the kept result to be sent")
        wait_for(lambda: _status(srv, "down") == pb.ORCHESTRATION_STATUS_COMPLETED, "the instance to complete")
    finally:
        w.stop()
        srv.stop()
    assert not _problems(caplog.records), _problems(caplog.records)


def test_the_worker_takes_work_items_up_to_max_message_bytes(sidecar) -> None:
    """A 5 MB input: beyond gRPC's 4 MB receive default, within a worker started with 8 MiB."""
    w = RunningWorker(sidecar.address, max_message_bytes=8 * 2**20)
    try:
        _start(sidecar.address, "big", "ignore_input", input=h.enc("x" * 5_000_000), timeout=30)
        wait_for(lambda: _status(sidecar, "big") == pb.ORCHESTRATION_STATUS_COMPLETED, "the 5 MB instance to complete")
    finally:
        w.stop()


def test_an_oversized_work_item_is_a_warning_naming_the_flag(sidecar, caplog) -> None:
    caplog.set_level(logging.WARNING)
    w = RunningWorker(sidecar.address, max_message_bytes=1_000_000)
    try:
        _start_later(sidecar.address, "big", "echo_input", input=h.enc("x" * 2_000_000), timeout=5)
        wait_for(lambda: any("--max-message-bytes 1000000" in r.getMessage() for r in caplog.records
                          if r.levelno == logging.WARNING), "a WARNING naming --max-message-bytes")
    finally:
        w.stop()


def test_the_max_message_bytes_flag_defaults_to_daprd_s_4_mib() -> None:
    from fake_worker.__main__ import build_parser

    parser = build_parser()
    assert parser.parse_args(["--sidecar", "x", "--programs", "p"]).max_message_bytes == 4 * 1024 * 1024
    args = parser.parse_args(["--sidecar", "x", "--programs", "p", "--max-message-bytes", "9000000"])
    assert args.max_message_bytes == 9_000_000


def _bare_sidecar(items: list[pb.WorkItem]) -> tuple[grpc.Server, str, threading.Event]:
    """A gRPC server that answers Hello and streams `items`, then holds the stream open."""
    done = threading.Event()

    def hello(raw: bytes, context: grpc.ServicerContext) -> bytes:
        return b""

    def work_items(raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        for item in items:
            yield item.SerializeToString()
        done.wait(30)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(TASKHUB.name, {
        "Hello": grpc.unary_unary_rpc_method_handler(hello),
        "GetWorkItems": grpc.unary_stream_rpc_method_handler(work_items),
    })])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}", done


def test_an_empty_work_item_is_a_warning(caplog) -> None:
    caplog.set_level(logging.WARNING)
    server, address, done = _bare_sidecar([pb.WorkItem(completionToken="empty-1")])
    try:
        w = RunningWorker(address)
        try:
            wait_for(lambda: any("empty-1" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING),
                  "a WARNING about the empty work item")
        finally:
            w.stop()
    finally:
        done.set()
        server.stop(0)


def test_a_second_execution_started_is_ignored() -> None:
    """Issue 11 #7: the program restarted on the second ExecutionStarted and the answer held both
    completeWorkflow and scheduleTask. The engine rule is that a second ExecutionStarted is a
    duplicate, dropped (engine-rules R2.7): the worker answers as if it were not there."""
    past = [h.workflow_started(0), h.execution_started("echo_input", "a"),
            h.task_scheduled(1, "echo", "a", execution_id=h.execution_id("wf-1", 0, 0))]
    new = [h.workflow_started(1), h.task_completed(1, "a", t=1)]
    doubled = [new[0], h.execution_started("echo_input", "a"), new[1]]
    plain = execute(BUNDLE, instance_id="wf-1", past=past, new=new)
    twice = execute(BUNDLE, instance_id="wf-1", past=past, new=doubled)
    kinds = [a.WhichOneof("workflowActionType") for a in twice.actions]
    assert not ("completeWorkflow" in kinds and "scheduleTask" in kinds), kinds
    assert list(twice.actions) == list(plain.actions)
    assert [a.WhichOneof("workflowActionType") for a in plain.actions] == ["completeWorkflow"]
    assert not plain.notes and "second ExecutionStarted" in " ".join(twice.notes)  # the worker logs it (WARNING)


def test_a_killed_worker_loses_nothing(tmp_path) -> None:
    """kill -9 of the worker process with activities in flight: a new worker finishes every
    instance, and every activity of every instance ran (some twice: those out at the kill)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps({"programs": {"chain": {"steps": [
        *({"call_activity": {"name": "record", "input": i}} for i in range(4)), {"return": "done"}]}}}))
    ledger = tmp_path / "ledger"
    srv = SidecarServer.start(port=0, db=str(tmp_path / "s.db"))

    def worker() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "fake_worker", "--sidecar", srv.address, "--programs",
                                 str(bundle), "--ledger", str(ledger)], cwd=root, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    first = worker()
    second = None
    ids = [f"wk-{i}" for i in range(20)]
    try:
        for iid in ids:
            _start_later(srv.address, iid, "chain")
        wait_for(lambda: ledger.exists() and len(ledger.read_text().splitlines()) >= 10, "activities to run")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        second = worker()
        for iid in ids:
            wait_for(lambda: _status(srv, iid) == pb.ORCHESTRATION_STATUS_COMPLETED, f"{iid} to complete", timeout=60)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        srv.stop()
    runs = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert {(r["instance_id"], r["task_id"]) for r in runs} == {(iid, t) for iid in ids for t in range(1, 5)}
    assert second is not None and "Traceback" not in second.stderr.read()
