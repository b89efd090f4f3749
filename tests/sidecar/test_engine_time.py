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


def test_a_waiters_permit_lets_the_clock_jump_due_time_after_due_time_until_something_changes() -> None:
    """The harness's waits (conformance/runner/harness.py `Looks`): engine time jumps while the state the
    wait read is unchanged, and the first change ends it, so an hour's retention cannot outrun the read."""
    import threading

    from fake_sidecar.engine.clock import VirtualClock
    from fake_sidecar.engine.ticker import Ticker
    from tests.waiting import wait_for

    lock = threading.RLock()
    ticker = Ticker(clock=VirtualClock(), lock=lock)
    ticker.only_passing = True  # the in-process pair's engine time: no free jumps
    served: list[str] = []
    closed = threading.Event()
    changed = threading.Event()  # stands for the engine's change counter: serving a due time commits

    def run_due(now: int) -> None:
        due = ticker.pop_due(now)
        served.extend(due)
        if due:
            changed.set()

    with lock:
        start = ticker.clock.now_ns()
        ticker.wake_at(start + HOUR_NS, "timer")
        ticker.wake_at(start + 2 * HOUR_NS, "retention")
    ticker.start(run_due=run_due, idle=lambda: True, closed=closed.is_set)
    try:
        with lock:
            ticker.permit(lambda: not changed.is_set())
        wait_for(lambda: "timer" in served, "the jump to the first due time")
        with lock:
            assert ticker.clock.now_ns() - start < 2 * HOUR_NS, "the clock went past the next due time"
            ticker.permit(lambda: False)  # a permit for a state that has changed since grants nothing
            ticker.hold(False)
        with lock:
            ticker.permit(lambda: True)
            ticker.hold(True)  # the harness acts: the permit was for what its wait saw
            ticker.hold(False)
            assert ticker._permit is None
            ticker.permit(lambda: True)  # a new wait that found nothing changed
        wait_for(lambda: "retention" in served, "the jump to the next due time on a fresh permit")
    finally:
        closed.set()
        with lock:
            ticker.wake_all()
        ticker.join(5)
