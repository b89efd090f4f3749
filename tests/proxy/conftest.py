"""Fixtures of the fault-proxy tests: a reference sidecar, a proxy in front of it, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest

from conformance.proxy import FaultProxy, FaultRule
from fake_sidecar.server import SidecarServer
from taskhub_wire.rpc import TaskHubClient


@pytest.fixture
def make_sidecar() -> Iterator[Callable[..., SidecarServer]]:
    started: list[SidecarServer] = []

    def make(**kw: object) -> SidecarServer:
        srv = SidecarServer.start(port=0, db=":memory:", **kw)  # type: ignore[arg-type]
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def sidecar(make_sidecar: Callable[..., SidecarServer]) -> SidecarServer:
    return make_sidecar()


@pytest.fixture
def make_proxy() -> Iterator[Callable[..., FaultProxy]]:
    started: list[FaultProxy] = []

    def make(upstream: str, rules: tuple[FaultRule, ...] | list[FaultRule] = ()) -> FaultProxy:
        proxy = FaultProxy.start(upstream=upstream, rules=rules)
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@pytest.fixture
def proxy(sidecar: SidecarServer, make_proxy: Callable[..., FaultProxy]) -> FaultProxy:
    return make_proxy(sidecar.address)


@pytest.fixture
def make_client() -> Iterator[Callable[..., TaskHubClient]]:
    channels: list[grpc.Channel] = []

    def make(address: str, **kw: object) -> TaskHubClient:
        channel = grpc.insecure_channel(address)
        channels.append(channel)
        return TaskHubClient(channel, **kw)  # type: ignore[arg-type]

    yield make
    for channel in channels:
        channel.close()
