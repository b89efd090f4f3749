"""Built-in activities, specified exactly so that every driver behaves the same (docs/programs.md).

- echo: returns its input.
- fail: input {"times": n, "message": m}; fails the first n executions of the same logical call
  (same instance and task execution id, so retries of one call count together), then returns the input.
- sleep: input seconds (number); sleeps that long, returns the input.
- record: appends one JSON line to the file named by env CONFORMANCE_LEDGER (instance id, task id,
  task execution id, attempt, worker pid, time), returns the input.
- propagated: returns what history the call received (history propagation): null when none, else
  {"scope": "own" | "lineage", "chunks": [{"app": <app id>, "instance": <instance id>,
  "workflow": <workflow name>}, ...]} in the order received. Its input is ignored.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

LEDGER_ENV = "CONFORMANCE_LEDGER"


class ActivityFailure(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass
class ActivityRunner:
    """Runs built-in activities; keeps the per-call attempt counts of this worker process."""

    ledger: str | None = None
    _attempts: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, *, name: str, input: Any, instance_id: str, task_id: int, task_execution_id: str,
            propagated: Any = None) -> Any:
        """`propagated` is the summary of the history the call received (see `propagated` above)."""
        key = (instance_id, task_execution_id or f"task-{task_id}", 0)
        with self._lock:
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
        if name == "echo":
            return input
        if name == "propagated":
            return propagated
        if name == "sleep":
            seconds = float(input or 0)
            time.sleep(max(0.0, seconds))
            return input
        if name == "fail":
            spec = input if isinstance(input, dict) else {"times": int(input or 0)}
            if attempt <= int(spec.get("times", 0)):
                raise ActivityFailure("ActivityFailure",
                                      str(spec.get("message", f"planned failure {attempt} of {spec.get('times')}")))
            return input
        if name == "record":
            path = self.ledger or os.environ.get(LEDGER_ENV)
            if not path:
                raise ActivityFailure("LedgerMissing", f"the record activity needs env {LEDGER_ENV} to name a file")
            line = json.dumps({"instance_id": instance_id, "task_id": task_id, "task_execution_id": task_execution_id,
                               "attempt": attempt, "worker_pid": os.getpid(), "time": time.time(), "input": input})
            with self._lock, open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            return input
        raise ActivityFailure("ActivityNotRegisteredError", f"Activity function named '{name}' was not registered.")
