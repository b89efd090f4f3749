"""The main job's scheduling: slots lent while a scenario waits, the longest first, the change counter the
harness's waits block on, and the virtual clock the harness holds between its steps."""

from __future__ import annotations

import threading
import time

import pytest

from conformance.runner.harness import Looks
from conformance.runner.slots import Slots, holding, longest_first, real_time_guess, waiting
from fake_sidecar.engine.changes import ChangeSignal
from fake_sidecar.engine.clock import VirtualClock
from fake_sidecar.engine.ticker import Ticker


def _eventually(cond, *, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_longest_first_puts_unknown_scenarios_first_then_the_slowest_of_the_last_run() -> None:
    keys = [("a/fast", "p"), ("a/new", "p"), ("a/slow", "p"), ("a/mid", "p"), ("a/newer", "p")]
    last = {("a/fast", "p"): 0.1, ("a/slow", "p"): 8.0, ("a/mid", "p"): 2.0}
    assert [keys[i][0] for i in longest_first(keys, last)] == ["a/new", "a/newer", "a/slow", "a/mid", "a/fast"]
    assert longest_first(keys, {}) == [0, 1, 2, 3, 4]  # no record: the plan's order


def test_a_first_run_starts_the_scenarios_that_ask_for_the_most_real_time_first() -> None:
    from conformance.library import find_library
    from conformance.scenario.loader import load_scenario

    root = find_library().root / "scenarios"
    ids = ["activities/chain", "crossapp/caller-sidecar-down-when-result-arrives", "tokens/token-echoed-exactly"]
    scenarios = [load_scenario(root / f"{i}.yaml", root=root) for i in ids]
    guesses = [real_time_guess(s) for s in scenarios]
    assert guesses[0] == 0.0 and guesses[1] == 4.0 and guesses[2] == 5.75, guesses
    keys = [(s.id, "p") for s in scenarios]
    assert [keys[i][0] for i in longest_first(keys, {}, guesses=guesses)] == [ids[2], ids[1], ids[0]]
    # A record of the last run comes first: the guesses only order the scenarios it does not know.
    last = {keys[0]: 9.0, keys[1]: 1.0}
    assert [keys[i][0] for i in longest_first(keys, last, guesses=guesses)] == [ids[2], ids[0], ids[1]]


def test_a_waiting_scenario_lends_its_slot_and_goes_on_without_waiting_for_one() -> None:
    slots = Slots(1)
    slots.admit()
    in_wait, end_wait, first_done = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with holding(slots, lend=True):
            with waiting():
                in_wait.set()
                end_wait.wait(10)
            first_done.set()  # back from the wait while the second holds the only slot

    threading.Thread(target=first, daemon=True).start()
    assert in_wait.wait(10)
    admitted = threading.Event()
    threading.Thread(target=lambda: (slots.admit(), admitted.set()), daemon=True).start()
    assert admitted.wait(10), "the slot of a waiting scenario was not lent"
    end_wait.set()
    assert first_done.wait(10), "a scenario whose wait ended waited for a slot"


def test_without_lending_a_waiting_scenario_keeps_its_slot() -> None:
    slots = Slots(1)
    slots.admit()
    in_wait, end_wait = threading.Event(), threading.Event()

    def first() -> None:
        with holding(slots, lend=False):
            with waiting():
                in_wait.set()
                end_wait.wait(10)

    threading.Thread(target=first, daemon=True).start()
    assert in_wait.wait(10)
    admitted = threading.Event()
    threading.Thread(target=lambda: (slots.admit(), admitted.set()), daemon=True).start()
    assert not admitted.wait(0.3)
    end_wait.set()
    assert admitted.wait(10)


def test_scenarios_in_flight_are_bounded_even_when_all_wait() -> None:
    slots = Slots(1)  # three in flight at most
    release = threading.Event()
    started = []

    def waiter() -> None:
        with holding(slots, lend=True), waiting():
            started.append(1)
            release.wait(10)

    for n in range(1, 4):
        slots.admit()
        threading.Thread(target=waiter, daemon=True).start()
        assert _eventually(lambda n=n: len(started) == n)  # in its wait: its slot is lent
    fourth = threading.Event()
    threading.Thread(target=lambda: (slots.admit(), fourth.set()), daemon=True).start()
    assert not fourth.wait(0.3)
    release.set()
    assert fourth.wait(10)


def test_change_signal_wakes_a_wait_past_the_mark_and_times_out_without_a_change() -> None:
    signal = ChangeSignal()
    seq = signal.seq
    assert signal.wait_past(seq, timeout=0.05) is False
    threading.Timer(0.05, signal.bump).start()
    began = time.monotonic()
    assert signal.wait_past(seq, timeout=10) is True
    assert time.monotonic() - began < 5
    assert signal.wait_past(seq, timeout=0) is True  # a change before the wait is not lost


def test_looks_pause_ends_at_the_change_not_at_the_backstop() -> None:
    signal = ChangeSignal()
    looks = Looks(lambda: signal)
    looks.mark()
    signal.bump()  # the change came during the read: the pause does not wait at all
    began = time.monotonic()
    looks.pause(10)
    assert time.monotonic() - began < 0.4


@pytest.mark.parametrize("held", [True, False])
def test_a_held_virtual_clock_does_not_jump_to_the_next_timer(held: bool) -> None:
    lock = threading.RLock()
    clock = VirtualClock()
    ticker = Ticker(clock=clock, lock=lock)
    due = clock.now_ns() + 3600 * 10**9
    closed = threading.Event()
    fired: list[int] = []  # the clock's reading when the timer's instance fell due
    with lock:
        ticker.wake_at(due, "i")
        ticker.hold(held)
    ticker.start(run_due=lambda now: fired.append(now) if ticker.pop_due(now) else None,
                 idle=lambda: True, closed=closed.is_set)
    try:
        if held:
            assert not _eventually(lambda: bool(fired), within=0.5), "a held clock jumped"
            with lock:
                ticker.hold(False)
        assert _eventually(lambda: bool(fired)), "the released clock never jumped to the timer"
        assert fired[0] >= due
    finally:
        closed.set()
        with lock:
            ticker.wake_all()
        ticker.join(5)


def _ticking(busy: threading.Event) -> tuple[threading.RLock, VirtualClock, Ticker, threading.Event]:
    lock, clock = threading.RLock(), VirtualClock()
    ticker, closed = Ticker(clock=clock, lock=lock), threading.Event()
    ticker.start(run_due=lambda now: ticker.pop_due(now), idle=lambda: not busy.is_set(), closed=closed.is_set)
    return lock, clock, ticker, closed


def _stop(lock: threading.RLock, ticker: Ticker, closed: threading.Event) -> None:
    closed.set()
    with lock:
        ticker.wake_all()
    ticker.join(5)


def test_a_sleep_on_engine_time_jumps_once_idle_and_passes_in_real_time_while_busy() -> None:
    busy = threading.Event()
    lock, clock, ticker, closed = _ticking(busy)
    try:
        began_real, began = time.monotonic(), clock.now_ns()
        with lock:
            assert ticker.pass_time(3600, done=closed.is_set) == 0
        assert clock.now_ns() - began >= 3600 * 10**9
        assert time.monotonic() - began_real < 60, "an idle engine's hour passed in real time"
        busy.set()  # work in flight: no jump, the sleep takes its real time
        began_real = time.monotonic()
        with lock:
            assert ticker.pass_time(0.3, done=closed.is_set) == 0
        assert time.monotonic() - began_real >= 0.3
    finally:
        _stop(lock, ticker, closed)


def test_a_sleep_on_engine_time_fires_the_timers_due_on_the_way_in_order() -> None:
    busy = threading.Event()
    lock, clock, ticker, closed = _ticking(busy)
    fired: list[tuple[str, int]] = []
    ticker_due = ticker.pop_due

    def pop(now: int) -> list[str]:
        out = ticker_due(now)
        fired.extend((iid, now) for iid in out)
        return out

    ticker.pop_due = pop  # type: ignore[method-assign]
    try:
        start = clock.now_ns()
        with lock:
            ticker.wake_at(start + 10 * 10**9, "ten")
            ticker.wake_at(start + 20 * 10**9, "twenty")
            assert ticker.pass_time(15, done=closed.is_set) == 0
        assert [iid for iid, _ in fired] == ["ten"], "the sleep jumped past its end or missed a timer"
        assert fired[0][1] >= start + 10 * 10**9
        assert clock.now_ns() < start + 20 * 10**9
    finally:
        _stop(lock, ticker, closed)


def test_on_engine_time_only_a_sleep_jumps_not_the_harness_other_waits() -> None:
    busy = threading.Event()
    lock, clock, ticker, closed = _ticking(busy)
    try:
        start = clock.now_ns()
        with lock:
            ticker.only_passing = True
            ticker.wake_at(start + 3600 * 10**9, "retention")  # a far timer: real time would never reach it
            ticker.wake_all()
        # Several idle looks of the ticker (50 ms each): none may jump.
        assert not _eventually(lambda: clock.now_ns() - start >= 60 * 10**9, within=0.5), \
            "the clock jumped to a timer with no sleep under way"
        with lock:
            assert ticker.pass_time(10, done=closed.is_set) == 0
        assert 10 * 10**9 <= clock.now_ns() - start < 3600 * 10**9
    finally:
        _stop(lock, ticker, closed)
