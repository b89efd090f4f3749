"""Waiting for a condition instead of sleeping: the one poll loop the project's tests share."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], what: str, *, timeout: float = 60.0, interval: float = 0.02) -> None:
    """Return once `condition()` holds; fail naming `what` if it does not within `timeout` seconds.

    The timeout is a deadline for a hang, not a timing assertion: it is generous on purpose."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
