"""A child process of a run (conformance/runner/processes.py): `python -m conformance.runner.child`.

stdin: the parent's ChildRun (one line), then the scenarios to run, one JSON line `{"scenario", "pair"}`
each; end of input: no more. stdout: the ScenarioStarted and ScenarioFinished events of those scenarios,
as events.jsonl lines. Anything else the process prints goes to stderr, so the events pipe carries events
only. SIGTERM: take no more work; the running scenarios end (stopping their targets), then the process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import IO

from conformance.errors import InputError
from conformance.events import Event, ScenarioFinished, ScenarioStarted, to_json
from conformance.reporting.logs import ScenarioLogs
from conformance.run_options import build_pairs, scenario_folder
from conformance.runner import run_item
from conformance.runner.isolation import EngineLock
from conformance.runner.processes import ChildRun, Item, error_result
from conformance.runner.slots import IN_FLIGHT_PER_JOB, Slots, holding, lends
from conformance.scenario.loader import load_scenario


def _events_pipe() -> IO[str]:
    """The events' own copy of stdout; fd 1 becomes stderr, for whatever else writes to it."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def serve(setup: ChildRun, *, lines: IO[str], out: IO[str]) -> int:
    # The parent checked the options and loaded the selection: this process builds the same pairs and
    # loads each scenario it is given, from its file (the whole library is the parent's to load).
    folder = scenario_folder(setup.options)
    pairs = {p.label: p for p in build_pairs(setup.options, required=setup.required)}
    written = threading.Lock()

    def send(event: Event) -> None:
        if isinstance(event, (ScenarioStarted, ScenarioFinished)):
            with written:
                out.write(to_json(event) + "\n")
                out.flush()

    # The parent made the logs folder; this process adds its scenarios' files to it.
    logs = ScenarioLogs(out_dir=setup.logs, verbose_stream=sys.stderr if setup.verbose else None, fresh=False)
    locks: dict[str, EngineLock] = {}

    def emit(event: Event) -> None:
        logs.handle_event(event)
        send(event)

    slots = Slots(setup.jobs)  # as in one process (conformance/runner/slots.py): the parent hands out enough

    def one(item: Item) -> None:
        began = time.monotonic()
        try:
            with holding(slots, lend=lends(item[1])):
                run_item(item, emit=emit, locks=locks, work_root=setup.work_root, invocation=setup.invocation)
        except Exception:  # noqa: BLE001 - the parent waits for a result of every scenario it handed out
            emit(error_result(item, message=f"the run of this scenario raised:\n{traceback.format_exc(limit=8)}",
                              duration=time.monotonic() - began, invocation=setup.invocation))

    from conformance.targets.warm import warm_workers

    with logs, warm_workers(tuple(pairs.values()), jobs=setup.jobs, enabled=not setup.options.fresh_workers), \
            ThreadPoolExecutor(max_workers=max(1, setup.jobs) * IN_FLIGHT_PER_JOB,
                                  thread_name_prefix="scenario") as pool:
        _READING.set()
        try:
            for line in lines:
                asked = json.loads(line)
                pair = pairs.get(asked["pair"])
                if pair is None:  # the parent prepared other pairs: a bug, said plainly (the parent reports it)
                    print(f"conformance child: no pair {asked['pair']!r} in this process's run "
                          f"(it has {', '.join(pairs)})", file=sys.stderr)
                    return 2
                scenario = load_scenario(folder / f"{asked['scenario']}.yaml", root=folder)  # InputError: main's
                slots.admit()
                pool.submit(one, (scenario, pair))
        except _Stopped:
            pass  # leaving the block waits for the running scenarios, which stop their targets
        finally:
            _READING.clear()
    return 0


class _Stopped(Exception):
    """SIGTERM while this process still took work."""


_READING = threading.Event()  # SIGTERM stops the reading only: once it is over the scenarios' ends are awaited


def main() -> int:
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # as `conformance` itself (conformance/cli.py)
    out = _events_pipe()

    def stop(*_: object) -> None:
        # Out of the stdin loop, never out of the wait for the running scenarios: leaving that wait would
        # start the interpreter's exit under them (their targets' thread pools refuse work, and they crash).
        if _READING.is_set():
            raise _Stopped

    signal.signal(signal.SIGTERM, stop)
    try:
        setup = ChildRun.decode(sys.stdin.readline())
        return serve(setup, lines=sys.stdin, out=out)
    except InputError as exc:
        print(f"conformance child: {exc.render()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
