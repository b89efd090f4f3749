"""What a turn delivers (taskhub_core/delivery.py), and that the engine, the fuzzer and the simulator
all take their turns from that one rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskhub_core import delivery
from taskhub_core.delivery import deliver, suspended_after, terminates
from taskhub_core.history import Operation, ResolutionKey
from taskhub_core.state import InboxItem
from taskhub_core.timestamps import ts, ts_ns
from taskhub_wire import pb
from taskhub_wire.kinds import event_kind

S = 1_000_000_000
BUNDLE_PATH = Path(__file__).resolve().parents[2] / "taskhub_programs" / "examples" / "bundle.yaml"


def ev(**body: object) -> pb.HistoryEvent:
    out = pb.HistoryEvent(eventId=-1, **body)  # type: ignore[arg-type]
    out.timestamp.CopyFrom(ts(5 * S))
    return out


def done(task: int) -> pb.HistoryEvent:
    return ev(taskCompleted=pb.TaskCompletedEvent(taskScheduledId=task))


def fired(timer: int, at: int) -> pb.HistoryEvent:
    out = pb.HistoryEvent(eventId=-1)
    out.timerFired.timerId = timer
    out.timerFired.fireAt.CopyFrom(ts(at))
    return out


def items(*events: tuple[pb.HistoryEvent, int]) -> list[InboxItem]:
    return [InboxItem(seq=i + 1, visible_at=vis, event=e) for i, (e, vis) in enumerate(events)]


def kinds(events: tuple[pb.HistoryEvent, ...]) -> list[str]:
    return [event_kind(e).value for e in events]


def test_workflow_started_first_then_visible_entries_in_inbox_order() -> None:
    inbox = items((fired(2, 3 * S), 3 * S), (done(1), 0), (ev(eventRaised=pb.EventRaisedEvent(name="go")), 9 * S))
    ticks = iter(range(4 * S + 7, 5 * S))
    turn = deliver(inbox, now_ns=4 * S, clock=lambda: next(ticks), started=True, resolved=())
    assert kinds(turn.new_events) == ["WorkflowStarted", "TimerFired", "TaskCompleted"]
    # Stamped in order on the scheduler's clock: the timer when it fires, then the turn.
    assert [ts_ns(e.timestamp) for e in turn.new_events[:2]] == [4 * S + 8, 4 * S + 7]
    assert turn.consumed == (1, 2)  # the event not visible yet stays


def test_duplicates_and_a_second_start_are_consumed_not_delivered() -> None:
    start = ev(executionStarted=pb.ExecutionStartedEvent(name="wf"))
    inbox = items((done(1), 0), (done(1), 0), (done(4), 0), (start, 0))
    turn = deliver(inbox, now_ns=S, started=True, resolved={ResolutionKey(Operation.TASK, 4)})
    assert kinds(turn.new_events) == ["WorkflowStarted", "TaskCompleted"]
    assert turn.new_events[1].taskCompleted.taskScheduledId == 1
    assert (turn.consumed, turn.duplicates) == ((1, 2, 3, 4), 2)
    first = deliver(items((start, 0)), now_ns=S, started=False, resolved=())
    assert kinds(first.new_events) == ["WorkflowStarted", "ExecutionStarted"]


def test_a_timer_fired_carries_the_time_it_fires_and_other_events_keep_theirs() -> None:
    timer, stamped_before = fired(2, 3 * S), fired(3, 3 * S)
    stamped_before.timestamp.CopyFrom(ts(2 * S))
    turn = deliver(items((timer, 3 * S), (done(1), 0), (stamped_before, 3 * S)), now_ns=8 * S, started=True,
                   resolved=())
    assert [ts_ns(e.timestamp) for e in turn.new_events] == [8 * S, 8 * S, 5 * S, 2 * S]
    assert not timer.HasField("timestamp")  # the inbox's own event is left as it was


def test_suspension_and_termination_of_a_turn() -> None:
    sus, res = ev(executionSuspended=pb.ExecutionSuspendedEvent()), ev(executionResumed=pb.ExecutionResumedEvent())
    assert suspended_after([sus, res, sus], suspended=False)
    assert not suspended_after([sus, res], suspended=True)
    assert suspended_after([], suspended=True)
    turn = deliver(items((sus, 0), (ev(executionTerminated=pb.ExecutionTerminatedEvent()), 0)), now_ns=S,
                   started=True, resolved=())
    assert turn.suspended and turn.terminated and terminates(turn.new_events)


def test_limit_takes_the_head_and_at_most_that_many_others() -> None:
    start = ev(executionStarted=pb.ExecutionStartedEvent(name="wf"))
    inbox = items((start, 0), (done(1), S), (done(2), S), (done(3), S))
    turn = deliver(inbox, now_ns=2 * S, started=False, resolved=(), limit=1)
    assert kinds(turn.new_events) == ["WorkflowStarted", "ExecutionStarted", "TaskCompleted"]
    assert turn.consumed == (1, 2)


def _engine_timer_time() -> int:
    """The delivered time of a TimerFired on the reference engine (in process, on a virtual clock)."""
    from fake_sidecar.engine import Engine, EngineConfig, VirtualClock
    from fake_sidecar.engine.store import MemoryStore

    clock = VirtualClock()
    engine = Engine(store=MemoryStore(), clock=clock, config=EngineConfig())
    engine.start()  # the ticker, which hands due timers to the dispatcher
    try:
        sid = engine.open_stream()
        engine.start_instance(instance_id="t", name="T", input=None)
        item = engine.take(sid, timeout=5)
        assert item is not None
        resp = pb.WorkflowResponse(instanceId="t", completionToken=item.completionToken)
        timer = resp.actions.add(id=1)
        timer.createTimer.fireAt.CopyFrom(ts(clock.now_ns() + 60 * S))
        engine.complete_turn(resp)
        engine.advance_clock(61)
        item = engine.take(sid, timeout=5)
        assert item is not None
        timers = [e for e in item.workflowRequest.newEvents if e.HasField("timerFired")]
        assert len(timers) == 1, item
        return ts_ns(timers[0].timestamp)
    finally:
        engine.close()


def test_the_engine_the_simulator_and_the_fuzzer_follow_a_change_of_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change one rule in one place (a TimerFired's delivered time) and all three follow."""
    import random

    from conformance.fuzz.interleave import RandomChooser, run_program
    from fake_worker.replay.simulate import simulate
    from taskhub_programs import load_bundle

    BUNDLE = load_bundle(BUNDLE_PATH)

    def timer_times() -> list[int]:
        sim = [ts_ns(e.timestamp) for t in simulate(BUNDLE, "timers") for e in t.new if e.HasField("timerFired")]
        fuzz = []
        for seed in range(8):
            run = run_program(BUNDLE, "timers", None, RandomChooser(random.Random(seed)), events=False,
                              suspend=False, terminate=False)
            fuzz += [ts_ns(e.timestamp) for c in run.cases for e in c.new if e.HasField("timerFired")]
        assert sim and fuzz
        return sim + fuzz + [_engine_timer_time()]

    assert all(t > 0 for t in timer_times())

    def unstamped(e: pb.HistoryEvent, clock: object) -> pb.HistoryEvent:
        return e  # the rule changed here only: a TimerFired keeps the time it was queued with (none)

    monkeypatch.setattr(delivery, "stamped", unstamped)
    assert all(t == 0 for t in timer_times())
