"""Stopping a run at once (an interrupt of the pytest path, conformance/pytest_plugin.py).

`stop_now` makes every scenario still running in this process give up at its next call to an engine
or its next wait (`Stopped`, an exception the runner reports like any other), refuses new processes
and ends, by their pids, the processes the harness started here and has not yet stopped
(conformance/targets/process.py: each leads its own session, so an interrupt sent to this process's
group never reaches them)."""

from __future__ import annotations

import threading

_STOP = threading.Event()


class Stopped(Exception):
    """The run is being stopped: the scenario gives up."""


def stop_now() -> None:
    from conformance.targets.process import end_live_processes

    _STOP.set()
    end_live_processes()


def reset() -> None:
    """A new session in this process (pytest.main run again) starts unstopped."""
    _STOP.clear()


def stopping() -> bool:
    return _STOP.is_set()


def check() -> None:
    if _STOP.is_set():
        raise Stopped("the run was interrupted")


def sleep(seconds: float) -> None:
    """time.sleep that gives up when the run is stopped."""
    if _STOP.wait(seconds):
        raise Stopped("the run was interrupted")
