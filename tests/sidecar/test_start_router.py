"""The router on ExecutionStarted reaches the worker with the first turn (engine-rules R11.3).

daprd stamps `{sourceAppID: app}` on an ExecutionStarted without a router in the inbox before it
builds the work item (orchestrator/run.go:148-160); an SDK that learns its own app from it
(durabletask-java) sends no targetAppID until it has it.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient
from tests.sidecar.rawworker import RawWorker, complete, kinds


@pytest.fixture
def two_apps() -> Iterator[SidecarServer]:
    srv = SidecarServer.start(port=0, db=":memory:", apps=("caller", "callee"))
    try:
        yield srv
    finally:
        srv.stop()


def _first_turn(address: str, background, iid: str) -> tuple[pb.HistoryEvent, RawWorker, TaskHubClient]:
    """The ExecutionStarted as the first turn carried it; the turn is answered with a completion."""
    worker = RawWorker(address)
    client = TaskHubClient(grpc.insecure_channel(address))
    started = background.submit(client.call, "StartInstance", pb.CreateInstanceRequest(instanceId=iid, name="W"),
                                timeout=10)
    turn = worker.next_workflow()
    assert kinds(turn.workflowRequest.newEvents) == ["WorkflowStarted", "ExecutionStarted"]
    worker.answer(turn, complete(0, '"done"'))
    assert started.result(timeout=10).instanceId == iid
    return turn.workflowRequest.newEvents[1], worker, client


@pytest.mark.parametrize("app", ["caller", "callee"])
def test_first_turn_carries_the_apps_router(two_apps: SidecarServer, background, app: str) -> None:
    started, worker, client = _first_turn(two_apps.app_addresses[app], background, f"w-{app}")
    assert started.HasField("router") and started.router.sourceAppID == app, started
    assert not started.router.HasField("targetAppID")
    # What was sent is what is stored: one stamp, the same on the record.
    hist = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=f"w-{app}")).events
    assert kinds(hist)[:2] == ["WorkflowStarted", "ExecutionStarted"]
    assert hist[1].router == started.router
    worker.cancel()


def test_one_app_sidecar_stamps_nothing(sidecar: SidecarServer, background) -> None:
    started, worker, _ = _first_turn(sidecar.address, background, "w")
    assert not started.HasField("router")  # R2.13: no apps, no routers
    worker.cancel()
