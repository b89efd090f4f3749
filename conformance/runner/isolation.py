"""Scenario isolation on a shared engine (`--sidecar address`): which work is whose, and who runs alone.

Engines hand work items to any connected worker, whatever the workflow's name, so renaming
workflows cannot keep scenarios that share an engine apart (a worker that gets a turn of a name
it lacks fails it). Instead:

- every instance the harness names in a request is claimed for the scenario's proxy, and the
  proxies of one engine pass each work item to the owner of its instance (conformance/proxy/
  routing.py; the owner also learns the children its worker creates);
- a scenario that acts on the worker's connection (stops, restarts or crashes the worker, cuts or
  corrupts its stream, restarts the sidecar) runs alone on the engine: an engine redelivers the
  work of a stream that ends, and with other scenarios connected that stream also carries their
  items, while theirs carries some of this scenario's.

Instance ids the harness generates are unique per run; a scenario's fixed ids are claimed too (two
runs using the same fixed id at once on one engine would still collide).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from conformance.scenario.model import Scenario
from conformance.targets.base import Pair

def claimer(proxy: Any) -> Callable[[Any], None]:
    """The claim function the harness's client calls with every request it sends."""

    def claim(request: Any) -> None:
        # RerunWorkflowFromEvent names the copy it creates (newInstanceID): its turns are this scenario's too.
        for field in ("instanceId", "instance_id", "newInstanceID", "sourceInstanceID"):
            iid = getattr(request, field, "")
            if isinstance(iid, str) and iid:
                proxy.claim(iid)

    return claim

def shares_engine(pair: Pair) -> bool:
    """The sidecar is one engine for every scenario of the run (started by the user)."""
    return pair.sidecar.kind == "address"

def needs_engine_alone(scenario: Scenario) -> bool:
    # A step that ends or replaces the worker's stream (or the engine under it) would cut others' streams too.
    return bool(scenario.faults or scenario.worker.get("adversary")
                or any(step.kind.connection for step in scenario.steps))

class EngineLock:
    """Many scenarios at once, or one alone; a waiting loner goes before newcomers (no starvation)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._alone = False
        self._loners_waiting = 0

    @contextmanager
    def hold(self, *, alone: bool) -> Iterator[None]:
        with self._cond:
            if alone:
                self._loners_waiting += 1
                self._cond.wait_for(lambda: not self._alone and self._running == 0)
                self._loners_waiting -= 1
                self._alone = True
            else:
                self._cond.wait_for(lambda: not self._alone and self._loners_waiting == 0)
                self._running += 1
        try:
            yield
        finally:
            with self._cond:
                if alone:
                    self._alone = False
                else:
                    self._running -= 1
                self._cond.notify_all()

@contextmanager
def engine_turn(pair: Pair, scenario: Scenario, locks: dict[str, EngineLock]) -> Iterator[None]:
    """Hold the shared engine as `scenario` needs it; nothing to hold when each scenario has its own."""
    if not shares_engine(pair):
        yield
        return
    lock = locks.setdefault(pair.sidecar.name, EngineLock())
    with lock.hold(alone=needs_engine_alone(scenario)):
        yield

@contextmanager
def process_engine_turn(pair: Pair, *, alone: bool, address: str = "") -> Iterator[None]:
    """`engine_turn` across processes (pytest-xdist workers): a shared engine's lock is a file lock,
    shared by the scenarios that can run together and exclusive for one that must run alone."""
    if not shares_engine(pair):
        yield
        return
    import fcntl
    import hashlib
    import tempfile
    from pathlib import Path

    key = hashlib.sha256(f"{pair.sidecar.name}|{address}".encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"taskhub-conformance-engine-{key}.lock"
    with path.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
