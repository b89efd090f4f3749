"""A counter that every change of the instance table moves, for whoever watches the engine as a whole.

`Engine.wait` watches one instance; the in-process harness waits for a state it reads over gRPC
(`conformance/runner/harness.py`, `wait_status`). Between two reads it blocks here until something
was committed instead of reading again every few milliseconds: a read costs a gRPC round trip on
both sides, and a scenario that waits seconds for a timer would read hundreds of times.
"""

from __future__ import annotations

import threading


class ChangeSignal:
    """Thread-safe: `bump` is called under the engine lock, `wait_past` from any thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._seq = 0

    @property
    def seq(self) -> int:
        return self._seq

    def bump(self) -> None:
        with self._cond:
            self._seq += 1
            self._cond.notify_all()

    def wait_past(self, seq: int, *, timeout: float) -> bool:
        """Block until the counter is no longer `seq` (True), or `timeout` seconds passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._seq != seq, timeout)
