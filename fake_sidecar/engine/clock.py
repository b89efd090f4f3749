"""Clocks in integer nanoseconds since the epoch.

The virtual clock lets the engine jump to the next due timer when nothing is in
flight, so a one-day timer fires at once in tests.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    virtual: bool

    def now_ns(self) -> int: ...

    def advance_to(self, when_ns: int) -> None: ...


class RealClock:
    virtual = False

    def now_ns(self) -> int:
        return time.time_ns()

    def advance_to(self, when_ns: int) -> None:  # real time cannot be moved
        raise RuntimeError("the real clock cannot be advanced; start the sidecar with --clock virtual")


class VirtualClock:
    """Real time plus an offset that only grows."""

    virtual = True

    def __init__(self) -> None:
        self._offset = 0
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        return time.time_ns() + self._offset

    def advance_to(self, when_ns: int) -> None:
        with self._lock:
            gap = when_ns - (time.time_ns() + self._offset)
            if gap > 0:
                self._offset += gap
