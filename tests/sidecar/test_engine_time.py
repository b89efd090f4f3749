"""Engine time on a virtual clock (the reference pair's `sleep` steps and sleeping activities): an activity
out on a stream keeps the engine busy, so the clock does not jump, unless its holder sleeps on engine time."""

from __future__ import annotations

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient
from tests.sidecar.rawworker import RawWorker, schedule
from tests.sidecar.test_engine_semantics import begin

HOUR_NS = 3600 * 10**9


@pytest.fixture
def virtual() -> SidecarServer:
    srv = SidecarServer.start(port=0, db=":memory:", clock="virtual")
    try:
        yield srv
    finally:
        srv.stop()


def test_an_activity_out_keeps_the_engine_busy_unless_it_sleeps_on_engine_time(virtual, background) -> None:
    channel = grpc.insecure_channel(virtual.address)
    try:
        client = TaskHubClient(channel)
        worker = RawWorker(virtual.address)
        begin(worker, client, background, "a", schedule(1, "sleep", "3600"))
        worker.next_activity()  # out on the stream, unanswered
        engine = virtual.engine
        with engine.lock:
            assert not engine.dispatcher.idle(), "an activity out on a stream left the engine idle"
        began = engine.clock.now_ns()
        assert engine.pass_time(3600, asleep=True) == 0
        assert engine.clock.now_ns() - began >= HOUR_NS, "the hour did not pass on the engine's clock"
        with engine.lock:
            assert not engine.dispatcher.idle(), "the activity stopped counting once its sleep ended"
        worker.cancel()
    finally:
        channel.close()
