"""Stopping a run at once (an interrupt of the pytest path, conformance/pytest_plugin.py).

`stop_now` makes every scenario still running in this process give up at its next call to an engine
or its next wait (`Stopped`, an exception the runner reports like any other) and refuses new processes;
conformance.targets.process.end_live_processes then ends, by their pids, the processes the harness
started here and has not yet stopped (each leads its own session, so an interrupt sent to this process's
group never reaches them; a process that starts meanwhile ends itself on seeing the flag)."""

from __future__ import annotations

import threading

_STOP = threading.Event()


class Stopped(Exception):
    """The run is being stopped: the scenario gives up."""


def stop_now() -> None:
    """Every scenario gives up at its next call or wait, and no process starts any more; the caller then
    ends the live ones (conformance.targets.process.end_live_processes, which imports this module)."""
    _STOP.set()


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
