"""A run's scenarios in several child processes, their events merged into the run's one stream.

The harness, the reference engine and the reference worker of every scenario are Python: in one
process they share one interpreter lock, so a run uses one core however many scenarios run at once.
Each child (`python -m conformance.runner.child`) prepares the same run from the run's options
(plan items hold scenarios and targets that do not pickle), and the parent hands it scenarios one
at a time as JSON lines `{"scenario": ID, "pair": LABEL}` on its stdin, up to `jobs` in flight. The
child answers with the run's own events, serialized as `reports/events.jsonl` holds them
(`conformance.events.to_json`), one a line on its stdout; the parent passes each to the run's sinks,
so the terminal and every report see what an in-process run shows. A child writes its scenarios'
log files itself (conformance/reporting/logs.py).

The parent hands out the longest scenarios first, by the last run's events.jsonl in the reports folder
(none: the plan's order), so that no long one starts last. Handing out work from the parent keeps two
properties of the in-process run:
- a scenario that needs a shared engine alone (conformance/runner/isolation.py) is handed out only
  when nothing else runs on that engine, and nothing else goes to it until it ends, whichever
  child runs what; a waiting one goes before later scenarios of that engine;
- no result is lost: a child that ends early turns the scenarios it was running into ERROR results
  that name it, its exit status and the end of its stderr; what it had not been given goes to the
  other children, or to a replacement (at most `processes` replacements, then the rest are ERROR).
On Ctrl-C or an error of the parent, every child is ended by its pid (SIGTERM, SIGKILL after a grace).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from conformance.events import Event, ScenarioFinished, ScenarioStarted, from_json
from conformance.failures import reproduce_line
from conformance.reproduce import Invocation, reproduce_command
from conformance.run_options import RunOptions
from conformance.runner.isolation import needs_engine_alone, shares_engine
from conformance.runner.slots import IN_FLIGHT_PER_JOB, last_durations, lends, longest_first, real_time_guess
from conformance.verdict import Outcome

CHILD_MODULE = "conformance.runner.child"
_GRACE_S = 10.0  # a stopped child's time to end the scenarios it runs (their targets) before SIGKILL
_STDERR_TAIL = 30  # lines of a child's stderr kept for the message of a child that ended early


@dataclass(frozen=True, kw_only=True)
class ChildRun:
    """What a child needs to prepare the parent's run: its options, and how the parent runs it."""

    options: RunOptions
    invocation: Invocation = Invocation()  # for the reproduce lines, as the parent's
    processes: int = 2
    jobs: int = 6  # scenarios at once in each child (the run's --jobs shared out)
    work_root: Path | None = None
    logs: Path | None = None  # the reports folder the children's ScenarioLogs write into; None: no logs
    verbose: bool = False  # the children echo warnings to stderr, as `-v` does in one process
    required: tuple[str, ...] = ()  # the capabilities the scenarios require (a declared one may be one of them)

    def encode(self) -> str:
        """One line for the child's stdin (RunOptions is plain frozen data; only this package reads it)."""
        return base64.b64encode(pickle.dumps(self)).decode("ascii")

    @staticmethod
    def decode(line: str) -> "ChildRun":
        setup = pickle.loads(base64.b64decode(line))
        if not isinstance(setup, ChildRun):
            raise ValueError(f"not a ChildRun: {type(setup).__name__}")
        return setup


def default_processes() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


Item = tuple[Any, Any]  # (Scenario, Pair)
Key = tuple[str, str]  # (scenario id, pair label): an item in both processes' plans


def key_of(item: Item) -> Key:
    return (item[0].id, item[1].label)


class _Child:
    """One child process, the scenarios it runs, and the threads that read its two pipes."""

    def __init__(self, *, number: int, setup: ChildRun, inbox: "queue.Queue[tuple[_Child, str | None]]") -> None:
        self.number = number
        self.running: dict[Key, float] = {}  # key -> when it was handed out
        self.started: set[Key] = set()  # handed out and begun (a child admits them as its slots free up)
        self.tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        root = str(Path(__file__).resolve().parents[2])  # this checkout's or installation's packages, first
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        # A session of its own: a terminal's Ctrl-C reaches the parent only, which ends the child by pid.
        self.popen = subprocess.Popen([sys.executable, "-m", CHILD_MODULE], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                      start_new_session=True)
        assert self.popen.stdin is not None and self.popen.stdout is not None and self.popen.stderr is not None
        self._stdin: IO[bytes] | None = self.popen.stdin
        self._send(setup.encode())
        threading.Thread(target=self._read_events, args=(self.popen.stdout, inbox), daemon=True,
                         name=f"child-{number}-events").start()
        self._stderr_done = threading.Event()
        threading.Thread(target=self._relay_stderr, args=(self.popen.stderr,), daemon=True,
                         name=f"child-{number}-stderr").start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def give(self, key: Key) -> None:
        self.running[key] = time.monotonic()
        self._send(json.dumps({"scenario": key[0], "pair": key[1]}))  # the child loads the scenario's own file

    @property
    def takes_work(self) -> bool:
        return self._stdin is not None

    def close_input(self) -> None:
        """No more work: the child ends once its running scenarios have."""
        if self._stdin is not None:
            try:
                self._stdin.close()
            except OSError:
                pass
            self._stdin = None

    def _send(self, line: str) -> None:
        if self._stdin is None:
            return
        try:
            self._stdin.write(line.encode() + b"\n")
            self._stdin.flush()
        except OSError:  # it has ended: its events pipe's end says so, with what it was running
            self._stdin = None

    def _read_events(self, out: IO[bytes], inbox: "queue.Queue[tuple[_Child, str | None]]") -> None:
        for raw in out:
            inbox.put((self, raw.decode()))
        inbox.put((self, None))

    def _relay_stderr(self, err: IO[bytes]) -> None:
        for raw in err:
            line = raw.decode(errors="replace")
            self.tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
            sys.stderr.flush()
        self._stderr_done.set()

    def ended(self) -> str:
        """Wait for the ended child; how it ended, with the end of its stderr."""
        code = self.popen.wait()
        self._stderr_done.wait(timeout=_GRACE_S)
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        tail = "\n".join(self.tail)
        return f"child process {self.number} (pid {self.pid}) {how}" + (f"; the end of its stderr:\n{tail}" if tail
                                                                        else "; it wrote nothing to stderr")

    def terminate(self) -> None:
        """Ask the child to end (SIGTERM, by pid): it takes no more work and lets its running scenarios stop
        their targets."""
        self.close_input()
        if self.popen.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait()


def _end_all(children: Sequence[_Child]) -> None:
    """End every child by its pid: SIGTERM, then SIGKILL for those still there after the grace (or a second
    Ctrl-C)."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + _GRACE_S
    try:
        for child in children:
            try:
                child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for child in children:
            child.kill()


class _Engines:
    """Which shared engines run what: the in-process EngineLock's rule, applied when handing out work."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.alone: set[str] = set()

    def pick(self, pending: Sequence[Item]) -> int | None:
        """The first pending item that may start now; a loner that must wait blocks its engine's later items."""
        blocked: set[str] = set()
        for i, (scenario, pair) in enumerate(pending):
            if not shares_engine(pair):
                return i
            engine = pair.sidecar.name
            if engine in blocked or engine in self.alone:
                continue
            if not needs_engine_alone(scenario) or self.running[engine] == 0:
                return i
            blocked.add(engine)
        return None

    def started(self, item: Item) -> None:
        if shares_engine(item[1]):
            self.running[item[1].sidecar.name] += 1
            if needs_engine_alone(item[0]):
                self.alone.add(item[1].sidecar.name)

    def ended(self, item: Item) -> None:
        if shares_engine(item[1]):
            self.running[item[1].sidecar.name] -= 1
            self.alone.discard(item[1].sidecar.name)  # a loner ran by itself: whatever ended, it is over


MOST_DEFAULT_PROCESSES = 4  # each child loads the library and imports the engine again (about 1 s of CPU)


def default_processes(pairs: Sequence[Any]) -> int:
    """The run's processes when --processes is not given: on the in-process pair (the reference sidecar and
    worker, all Python under one interpreter lock) one per core and one more, up to MOST_DEFAULT_PROCESSES; a pair
    with a process of its own per scenario (an SDK worker, daprd) does its work outside this interpreter,
    so it stays in one."""
    if not pairs or not all(p.in_process for p in pairs):
        return 1
    # One more than the cores: a process's scenarios also wait (no GIL held), and the spare one fills that.
    return max(1, min((os.cpu_count() or 1) + 1, MOST_DEFAULT_PROCESSES))


def run_in_processes(items: Sequence[Item], *, emit: Callable[[Event], None], setup: ChildRun) -> list[ScenarioFinished]:
    """Run `items` in `setup.processes` children; every event goes to `emit` on this thread; the results in
    the items' order."""
    by_key = {key_of(item): item for item in items}
    # Longest first, by the last run's record: a long scenario handed out last would run alone at the end.
    last = last_durations(setup.logs)
    pending: list[Item] = [items[i] for i in longest_first([key_of(item) for item in items], last,
                                                           guesses=[real_time_guess(item[0]) for item in items])]
    results: dict[Key, ScenarioFinished] = {}
    inbox: queue.Queue[tuple[_Child, str | None]] = queue.Queue()
    engines = _Engines()
    children: list[_Child] = []
    replacements = setup.processes  # children started in place of ones that ended early
    numbers = iter(range(1, 1_000_000))

    def start() -> None:
        children.append(_Child(number=next(numbers), setup=setup, inbox=inbox))

    def finish(result: ScenarioFinished) -> None:
        results[(result.scenario, result.pair)] = result
        emit(result)

    # A child lends a waiting scenario's slot as one process does (slots.py): it gets enough to fill them.
    most = setup.jobs * (IN_FLIGHT_PER_JOB if all(lends(item[1]) for item in items) else 1)

    def hand_out() -> None:
        while pending:
            free = [c for c in children if c.takes_work and len(c.running) < most]
            if not free:
                return
            i = engines.pick(pending)
            if i is None:
                return
            item = pending.pop(i)
            engines.started(item)
            min(free, key=lambda c: len(c.running)).give(key_of(item))
        for child in children:  # nothing left to hand out: each ends after its running scenarios
            child.close_input()

    try:
        for _ in range(max(1, min(setup.processes, len(items)))):
            start()
        hand_out()
        while len(results) < len(items):
            child, line = inbox.get()
            if line is not None:
                event = from_json(line)
                if isinstance(event, ScenarioFinished):
                    item = by_key[(event.scenario, event.pair)]
                    child.running.pop(key_of(item), None)
                    engines.ended(item)
                    finish(event)
                    hand_out()
                elif isinstance(event, ScenarioStarted):
                    child.started.add((event.scenario, event.pair))
                    emit(event)
                continue
            children.remove(child)
            how = child.ended()
            unbegun: list[Item] = []
            for key, handed in child.running.items():  # what it was running: ERROR, never lost
                engines.ended(by_key[key])
                if replacements > 0 and key not in child.started:  # handed out, waiting for a slot there
                    unbegun.append(by_key[key])
                    continue
                finish(error_result(by_key[key], message=f"{how}\n(it was running this scenario)",
                                    duration=time.monotonic() - handed, invocation=setup.invocation))
            pending[:0] = unbegun  # the replacement runs them first, as they were next
            if not pending:
                continue
            if replacements > 0:
                replacements -= 1
                start()
                hand_out()
            elif not children:
                for item in pending:  # not run: said so, not left out of the reports
                    finish(error_result(item, message=f"{how}\n(this scenario was not run: every child process "
                                                      "ended early, and as many replacements)", duration=0.0,
                                        invocation=setup.invocation))
                pending.clear()
    finally:
        _end_all(children)  # normally all have ended; after Ctrl-C or an error, each by its pid
    return [results[key_of(item)] for item in items]


def error_result(item: Item, *, message: str, duration: float, invocation: Invocation) -> ScenarioFinished:
    """The ERROR result of a scenario whose run gave none (its process ended, or the run raised)."""
    scenario, pair = item
    reproduce = reproduce_command(scenario.id, sidecar=pair.sidecar.name, worker=pair.worker.name,
                                  invocation=invocation)
    return ScenarioFinished(scenario=scenario.id, pair=pair.label, sidecar=pair.sidecar.name,
                            worker=pair.worker.name, outcome=Outcome.ERROR, duration_s=duration,
                            requirements=scenario.requirements, title=scenario.title, source=scenario.source,
                            reproduce=reproduce, started_at=time.time(),
                            message=f"{message}\n{reproduce_line(reproduce)}")
