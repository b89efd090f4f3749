"""The example bundle runs to the expected results on the reference sidecar and on durabletask-go.

The reference worker runs in-process; each engine is a real server on loopback. Where
durabletask-go behaves differently from the reference sidecar, the case says so and
engine-rules.md is the arbiter.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from conformance.targets.durabletask_go import DurableTaskGoSidecar
from fake_sidecar.server import SidecarServer
from fake_worker.client import Worker, WorkerOptions
from taskhub_programs import load_bundle
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

BUNDLE = Path(__file__).resolve().parents[2] / "taskhub_programs" / "examples" / "bundle.yaml"


@dataclass(frozen=True)
class Case:
    program: str
    input: object = None
    events: tuple[tuple[str, object], ...] = ()
    status: str = "COMPLETED"
    output: object = None
    error_type: str | None = None
    custom_status: str | None = None
    ledger_lines: int | None = None
    history_has: tuple[str, ...] = field(default_factory=tuple)


CASES = [
    Case("chain", input="a", output="a-b-c"),
    Case("fan_out_in", output=15),
    Case("timers", output="slept", history_has=("TimerCreated", "TimerFired")),
    Case("event_timeout", events=(("approve", "yes"),), output="yes"),
    Case("event_wait", events=(("APPROVE", "ok"),), output="ok"),  # names match case-insensitively
    Case("child", input="x", output="child:x-b-c", history_has=("ChildWorkflowInstanceCreated",
                                                                 "ChildWorkflowInstanceCompleted")),
    Case("counter", input=0, output=3),
    Case("retry", output="recovered", history_has=("TaskFailed", "TimerCreated", "TaskCompleted")),
    Case("patched", output="new"),
    Case("status", output="done", custom_status="two"),
    Case("failing", input="z", status="FAILED", error_type="BusinessError"),
    Case("race", events=(("go", 1),), output=0),
    Case("versioned", events=(("next", 1),), output="v2"),
    Case("recorded", input={"k": 1}, output={"k": 1}, ledger_lines=1),
]


class Engine:
    address: str

    def stop(self) -> None: ...


class Reference(Engine):
    def __init__(self, tmp: Path) -> None:
        self.srv = SidecarServer.start(port=0, db=str(tmp / "ref.db"))
        self.address = self.srv.address

    def stop(self) -> None:
        self.srv.stop()


class DurableTaskGo(Engine):
    def __init__(self, tmp: Path) -> None:
        self.proc = DurableTaskGoSidecar().start(log_dir=tmp / "dtgo")
        self.address = self.proc.address

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture(params=["reference", pytest.param("durabletask-go", marks=pytest.mark.dtgo)])
def engine(request, tmp_path) -> Iterator[Engine]:
    eng = Reference(tmp_path) if request.param == "reference" else DurableTaskGo(tmp_path)
    try:
        yield eng
    finally:
        eng.stop()


@pytest.fixture
def ledger(tmp_path) -> Path:
    return tmp_path / "ledger.jsonl"


@pytest.fixture
def worker(engine, ledger) -> Iterator[Worker]:
    from fake_worker.activities import ActivityRunner

    w = Worker(bundle=load_bundle(BUNDLE), options=WorkerOptions(sidecar=engine.address),
               activities=ActivityRunner(ledger=str(ledger)))
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    assert w.connected_once.wait(15), "the reference worker did not connect"
    try:
        yield w
    finally:
        w.stop()
        t.join(10)


@pytest.mark.parametrize("case", CASES, ids=[c.program for c in CASES])
def test_example_program(case: Case, engine: Engine, worker: Worker, ledger: Path) -> None:
    channel = grpc.insecure_channel(engine.address)
    client = TaskHubClient(channel)
    iid = f"{case.program}-{uuid.uuid4().hex[:8]}"
    try:
        req = pb.CreateInstanceRequest(instanceId=iid, name=case.program)
        if case.input is not None:
            req.input.value = json.dumps(case.input)
        client.call("StartInstance", req, timeout=30)
        for name, data in case.events:
            time.sleep(0.2)
            ev = pb.RaiseEventRequest(instanceId=iid, name=name)
            ev.input.value = json.dumps(data)
            client.call("RaiseEvent", ev, timeout=10)
        state = client.call("WaitForInstanceCompletion",
                            pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True), timeout=60).workflowState
        status = pb.OrchestrationStatus.Name(state.workflowStatus).removeprefix("ORCHESTRATION_STATUS_")
        assert status == case.status, f"{iid}: {status} {state.failureDetails.errorType}: {state.failureDetails.errorMessage}"
        if case.status == "COMPLETED":
            assert json.loads(state.output.value) == case.output
        if case.error_type:
            assert state.failureDetails.errorType == case.error_type
        if case.custom_status is not None:
            assert state.customStatus.value == case.custom_status
        if case.history_has:
            from taskhub_wire.kinds import event_kind

            kinds = [event_kind(e) for e in
                     client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid)).events]
            for k in case.history_has:
                assert k in kinds, f"{k} missing from {kinds}"
        if case.ledger_lines is not None:
            lines = [json.loads(line) for line in ledger.read_text().splitlines()]
            mine = [line for line in lines if line["instance_id"] == iid]
            assert len(mine) == case.ledger_lines
            assert mine[0]["task_execution_id"] and mine[0]["attempt"] == 1
    finally:
        channel.close()
