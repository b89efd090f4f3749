"""Engine time: strictly increasing timestamps, the due-time heap and the thread that serves it.

The heap holds (due time, instance id) for every instance that has something due later: a timer,
a scheduled start, a turn's retry, an activity lease. The ticker thread wakes at the earliest one
and hands the instance back to the engine (`run_due`); on a virtual clock that stays idle, it
jumps the clock to the next due time, or to the end of a `pass_time` (a harness's `sleep` step)
when that comes first.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import Callable

from fake_sidecar.engine import errors
from fake_sidecar.engine.clock import Clock

log = logging.getLogger("fake_sidecar.engine")

_IDLE_JUMP_NS = 50_000_000  # virtual clock: stay idle this long before jumping to the next timer


class Ticker:
    """The engine's clock and due times; all methods but `start`/`join` are called under `lock`."""

    def __init__(self, *, clock: Clock, lock: threading.RLock) -> None:
        self.clock = clock
        self._wake = threading.Condition(lock)
        self._due: list[tuple[int, str]] = []
        self._last_ns = 0
        self._thread: threading.Thread | None = None
        self._held = False  # a virtual clock does not jump while its driver (the harness) acts
        self._passing: list[int] = []  # the ends of `pass_time` calls under way: jump targets too
        # Jump only while a `pass_time` is under way (engine time for a harness that did not ask for a
        # virtual clock: its other waits let real time pass, as it would on a real clock).
        self.only_passing = False
        # A harness's wait read the state, found it not yet what it waits for, and nothing has changed
        # since while this holds (`permit`): engine time may jump on, as during a `pass_time`.
        self._permit: Callable[[], bool] | None = None

    def now(self) -> int:
        """Strictly increasing timestamps: SDKs derive ids from WorkflowStarted times."""
        n = self.clock.now_ns()
        if n <= self._last_ns:
            n = self._last_ns + 1000
        self._last_ns = n
        return n

    def wake_at(self, ns: int, iid: str) -> None:
        """Hand instance `iid` back to the engine once the clock reaches `ns`."""
        heapq.heappush(self._due, (ns, iid))
        self._wake.notify_all()

    def next_due(self) -> int | None:
        return self._due[0][0] if self._due else None

    def pop_due(self, now: int) -> list[str]:
        """The instances due by `now`, in due order (an instance may appear more than once)."""
        out = []
        while self._due and self._due[0][0] <= now:
            out.append(heapq.heappop(self._due)[1])
        return out

    def advance(self, seconds: float) -> None:
        """Move a virtual clock forward (harness control)."""
        if not self.clock.virtual:
            raise errors.FailedPrecondition("the sidecar runs on the real clock; start it with --clock virtual")
        self.clock.advance_to(self.clock.now_ns() + int(seconds * 1e9))
        self._wake.notify_all()

    def wake_all(self) -> None:
        self._wake.notify_all()

    def pass_time(self, seconds: float, *, done: Callable[[], bool]) -> int:
        """Block until `seconds` of engine time have passed (or `done()`): on a virtual clock that is real
        time while anything is in flight and a jump once the engine is idle, as for a timer; returns the
        nanoseconds still to pass when `done()` ended it early (0 otherwise). Called under `lock`."""
        end = self.clock.now_ns() + int(seconds * 1e9)
        heapq.heappush(self._passing, end)
        self._wake.notify_all()
        try:
            while not done() and self.clock.now_ns() < end:
                self._wake.wait(max(0.001, min(1.0, (end - self.clock.now_ns()) / 1e9)))
        finally:
            self._passing.remove(end)
            heapq.heapify(self._passing)
        return max(0, end - self.clock.now_ns())

    def permit(self, still: Callable[[], bool]) -> None:
        """Let an idle virtual clock jump on while `still()` holds: a waiter has read the state and found it
        not yet what it waits for, and `still()` is true until the engine commits anything. Jumps go due
        time after due time and the first one that changes anything ends the permit, so the waiter reads
        each due time's effect before the clock passes the next (a jump to an hour's retention must not
        outrun the read that would have ended the wait). Called under `lock`."""
        self._permit = still
        self._wake.notify_all()

    def hold(self, held: bool) -> None:
        """While held, a virtual clock moves only by `advance`: whoever drives the engine is between two
        steps, and a jump now would fire a timer before a step that comes "at once" (a raise right after
        a start). Idle jumps resume once released (the driver waits)."""
        self._held = held
        if held:
            self._permit = None  # the driver acts: a permit was for the state its wait saw
        self._wake.notify_all()

    def start(self, *, run_due: Callable[[int], None], idle: Callable[[], bool], closed: Callable[[], bool]) -> None:
        """Start the thread that calls `run_due(now)` whenever something falls due."""
        self._thread = threading.Thread(target=self._loop, args=(run_due, idle, closed), name="engine-ticker",
                                        daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self, run_due: Callable[[int], None], idle: Callable[[], bool], closed: Callable[[], bool]) -> None:
        with self._wake:
            idle_since: int | None = None
            while not closed():
                now = self.clock.now_ns()
                run_due(now)
                wait = 1.0
                ahead = [self._due[0][0]] if self._due else []
                ahead += self._passing[:1]
                if self._due:
                    wait = max(0.0, min(wait, (self._due[0][0] - now) / 1e9))
                permitted = self._permit is not None and self._permit()
                if (self.clock.virtual and ahead and idle() and not self._held
                        and (self._passing or not self.only_passing or permitted)):
                    real = time.monotonic_ns()
                    if idle_since is None:
                        idle_since = real
                    elif real - idle_since >= _IDLE_JUMP_NS:
                        target = min(ahead)
                        if target > now:
                            log.info("virtual clock jumps %.3fs ahead", (target - now) / 1e9)
                            self.clock.advance_to(target)
                            self._wake.notify_all()  # a `pass_time` that ends there
                        idle_since = None
                        continue
                    wait = min(wait, 0.02)
                else:
                    idle_since = None
                self._wake.wait(wait)
