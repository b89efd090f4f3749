"""Built-in activities, specified exactly so that every driver behaves the same (docs/programs.md,
"Built-in activities"; their outcomes are cases of tests/programs/golden/programs.json).

`builtin` is what an activity does on one execution (pure: its result, or how long to sleep first,
or its failure); `ActivityRunner` counts the attempts of each logical call and does the side
effects (the sleep, the ledger line).

`propagated` returns what history the call received (history propagation): null when none, else
{"scope": "own" | "lineage", "chunks": [{"app": <app id>, "instance": <instance id>,
"workflow": <workflow name>}, ...]} in the order received. With the input {"events": true} each chunk
also lists its events, {"kind", and "name", "input", "result", "error" where the event has them}
(capability propagated_events); any other input is ignored.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taskhub_programs import text

LEDGER_ENV = "CONFORMANCE_LEDGER"


class ActivityFailure(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def builtin(name: str, input: Any, attempt: int, *, propagated: Any = None) -> tuple[Any, float]:  # noqa: A002
    """(result, seconds to sleep before returning it) of the `attempt`-th execution of one call;
    ActivityFailure when it fails. `propagated`: the summary of the history the call received."""
    if name in ("echo", "record"):
        return input, 0.0
    if name == "propagated":
        return propagated, 0.0
    if name == "sleep":
        if input is None or _number(input):
            return input, max(0.0, float(input or 0))
        raise ActivityFailure("ActivityInputError", f"sleep takes a number of seconds or null, got {text(input)}")
    if name == "fail":
        spec = input if isinstance(input, dict) else {"times": input}
        times = 0 if spec.get("times") is None else spec["times"]
        if not _number(times):
            raise ActivityFailure("ActivityInputError", f"fail takes a number or {{times, message}}, got {text(input)}")
        if attempt <= times:
            message = spec["message"] if "message" in spec else f"planned failure {attempt} of {text(times)}"
            raise ActivityFailure("ActivityFailure", text(message))
        return input, 0.0
    raise ActivityFailure("ActivityNotRegisteredError", f"Activity function named '{name}' was not registered.")


@dataclass
class ActivityRunner:
    """Runs built-in activities; keeps the per-call attempt counts of this worker process."""

    ledger: str | None = None
    # How an activity's sleep passes: real time, or the engine's when the harness runs the pair in one
    # process (conformance/targets/reference.py, `ReferenceSidecar.sleep_in_flight`).
    sleep: Callable[[float], None] = time.sleep
    _attempts: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, *, name: str, input: Any, instance_id: str, task_id: int, task_execution_id: str,
            propagated: Any = None) -> Any:
        key = (instance_id, task_execution_id or f"task-{task_id}", 0)
        with self._lock:
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
        result, seconds = builtin(name, input, attempt, propagated=propagated)
        if seconds:
            self.sleep(seconds)
        if name == "record":
            path = self.ledger or os.environ.get(LEDGER_ENV)
            if not path:
                raise ActivityFailure("LedgerMissing", f"the record activity needs env {LEDGER_ENV} to name a file")
            line = json.dumps({"instance_id": instance_id, "task_id": task_id, "task_execution_id": task_execution_id,
                               "attempt": attempt, "worker_pid": os.getpid(), "time": time.time(), "input": input})
            with self._lock, open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        return result
