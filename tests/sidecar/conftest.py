from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from taskhub_wire.rpc import TaskHubClient


@pytest.fixture
def sidecar() -> Iterator[SidecarServer]:
    srv = SidecarServer.start(port=0, db=":memory:")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def client(sidecar: SidecarServer) -> Iterator[TaskHubClient]:
    channel = grpc.insecure_channel(sidecar.address)
    try:
        yield TaskHubClient(channel)
    finally:
        channel.close()


def result(fut: "Future[object]", timeout: float = 10.0) -> object:
    return fut.result(timeout=timeout)

