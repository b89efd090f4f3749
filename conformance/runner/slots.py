"""How many scenarios of a run work at once: `--jobs`, counting only those not waiting.

Most of a scenario's run time is waiting in real time: a `sleep` step, or a read of the sidecar's
state repeated until a timer fired, an activity ended or a worker came back. A scenario that waits
uses no CPU, so it gives up its slot meanwhile and the run starts another one; when the wait ends it
goes on at once, without waiting for a slot (its timing is what it checks), and the run starts no
new scenario until fewer than `--jobs` work again. So `--jobs` bounds the work done at once (what
makes timing-bound scenarios late on a loaded machine) and not the waits, which overlap freely.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conformance.scenario.model import Scenario
    from conformance.targets.base import Pair


IN_FLIGHT_PER_JOB = 3  # at most this many scenarios per slot started and not finished, waiting ones included


class Slots:
    """`jobs` slots; `admit` blocks a new scenario until one is free, `lent` lends one out while waiting.

    Scenarios in flight are bounded too (IN_FLIGHT_PER_JOB per slot): every scenario of the reference
    pair keeps its engine's, proxy's and worker's threads alive while it waits, and they all share one
    interpreter, so past some number a waking scenario waits for the GIL longer than its timing allows
    (a half-way read of a 1 s timer after a 500 ms sleep)."""

    def __init__(self, jobs: int) -> None:
        self._jobs = max(1, jobs)
        self._most = self._jobs * IN_FLIGHT_PER_JOB
        self._working = 0
        self._in_flight = 0
        self._cond = threading.Condition()

    def admit(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._working < self._jobs and self._in_flight < self._most)
            self._working += 1
            self._in_flight += 1

    def release(self) -> None:
        """The scenario has finished (`holding`)."""
        with self._cond:
            self._working -= 1
            self._in_flight -= 1
            self._cond.notify()

    @contextmanager
    def lent(self) -> Iterator[None]:
        with self._cond:
            self._working -= 1
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:  # back at once: a waiting scenario may exceed `jobs` for a moment
                self._working += 1


# What the current thread's scenario does around each of its waits: lend its slot, let a virtual clock
# jump (conformance/runner/harness.py). Context managers, entered in order.
_HOOKS: ContextVar[tuple[Callable[[], AbstractContextManager[None]], ...]] = ContextVar("conformance_wait_hooks",
                                                                                        default=())


@contextmanager
def around_waits(hook: Callable[[], AbstractContextManager[None]]) -> Iterator[None]:
    """While inside, every `waiting()` of this thread also runs inside `hook()`."""
    token = _HOOKS.set(_HOOKS.get() + (hook,))
    try:
        yield
    finally:
        _HOOKS.reset(token)


def lends(pair: Pair) -> bool:
    """Whether a scenario on `pair` lends its slot while it waits: only on the reference pair, all in this
    process; a sidecar or SDK worker process started per scenario (daprd's, a JVM) is heavy while it
    waits, and those runs are sized by --jobs alone."""
    return pair.in_process


@contextmanager
def holding(slots: Slots, *, lend: bool) -> Iterator[None]:
    """Run a scenario in a slot of `slots` it was admitted to (`Slots.admit`); with `lend` (`lends`), its
    waits lend the slot out."""
    try:
        if lend:
            with around_waits(slots.lent):
                yield
        else:
            yield
    finally:
        slots.release()


@contextmanager
def waiting() -> Iterator[None]:
    """A real-time wait of the current scenario (its slot is free meanwhile; nothing outside a run)."""
    with ExitStack() as stack:
        for hook in _HOOKS.get():
            stack.enter_context(hook())
        yield


def last_durations(reports: Path | None) -> dict[tuple[str, str], float]:
    """(scenario, pair) -> its run time in the last run written to `reports` (its events.jsonl); empty when
    there is none. Only the scenario_finished lines are parsed (the file holds every transcript). An order
    is only a hint: a line that cannot be read is skipped."""
    out: dict[tuple[str, str], float] = {}
    if reports is None:
        return out
    try:
        with (reports / "events.jsonl").open(encoding="utf-8") as f:
            for line in f:
                if '"scenario_finished"' not in line:
                    continue
                try:
                    e = json.loads(line)
                    out[(str(e["scenario"]), str(e["pair"]))] = float(e["duration_s"])
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue
    except OSError:
        return {}
    return out


def longest_first(keys: Sequence[tuple[str, str]], durations: Mapping[tuple[str, str], float], *,
                  guesses: Sequence[float] = ()) -> list[int]:
    """The indexes of `keys` in the order to start them: longest last time first, so the longest waits
    overlap with the rest instead of ending the run; unknown ones (new scenarios, or every one on a first
    run) before all, longest `guesses` (per key, `real_time_guess`) first, else in their own order."""
    def order(i: int) -> tuple[float, float]:
        return -durations.get(keys[i], float("inf")), -(guesses[i] if i < len(guesses) else 0.0)

    return sorted(range(len(keys)), key=order)


def real_time_guess(scenario: Scenario) -> float:
    """A scenario's run time before it has one: the seconds it asks to pass where engine time cannot skip
    them, a hint for the order only. Fault delays pass in real time; a `sleep` step does while a sidecar is
    down or a worker stopped, and with several apps (work for an app without a worker keeps the engine
    busy); any other sleep jumps, and counts a tenth. A sidecar kill adds a second (the worker's reconnect
    back-off)."""
    from conformance.scenario import steps

    seconds = 0.0
    for rule in scenario.faults:
        seconds += float(getattr(rule, "delay_s", 0) or 0) + float(getattr(rule, "replay_after_s", 0) or 0)
    away = bool(scenario.apps)
    for step in scenario.steps:
        args = step.args
        if isinstance(args, steps.Sleep):
            seconds += args.seconds if away else args.seconds / 10
        elif isinstance(args, steps.KillSidecar):
            seconds += 1.0
            away = True
        elif isinstance(args, steps.StopWorker):
            away = True
        elif isinstance(args, (steps.RestartSidecar, steps.StartWorker)) and not scenario.apps:
            away = False
    return seconds
