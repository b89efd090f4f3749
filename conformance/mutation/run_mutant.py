"""One mutant's run: the mutated file written into the copy, the scenarios that reach it run with
`conformance run` on the copy's driver in chunks (in the order the campaign ranked them) until one
fails, under a timeout.

Killed: a scenario that PASSED on the unmutated SDK is FAILED or ERROR. Timeout: the runs did not end
within the mutant's time (a hang the scenarios' own timeouts did not turn into a verdict).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    status: str  # killed, survived or timeout
    scenarios_run: tuple[str, ...]
    killed_by: tuple[str, ...]  # the scenarios that failed, with their first failure line
    seconds: float


@contextmanager
def mutated(path: Path, text: str) -> Iterator[None]:
    """`path` holds `text` for the block, then its own text again; no stale bytecode either way."""
    original = path.read_bytes()
    cache = path.parent / "__pycache__"

    def drop_bytecode() -> None:
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            pyc.unlink()

    drop_bytecode()
    path.write_text(text, encoding="utf-8")
    try:
        yield
    finally:
        path.write_bytes(original)
        drop_bytecode()


def _stop(proc: subprocess.Popen) -> None:
    """End the run we started and everything it started (its own process group), by its id."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_scenarios(*, worker: str, command: str, scenarios: Sequence[str],
                  jobs: int, timeout_s: float, chunk: int) -> RunResult:
    began = time.monotonic()
    ran: list[str] = []
    deadline = began + timeout_s
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # the mutated module is never cached as bytecode
    for start in range(0, len(scenarios), chunk):
        part = list(scenarios[start:start + chunk])
        with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
            argv = [sys.executable, "-m", "conformance", "run", "--worker", worker, "--worker-command", command,
                    "--reports", tmp, "--jobs", str(jobs)]
            for sid in part:
                argv += ["--scenario", sid]
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _stop(proc)
                return RunResult(status="timeout", scenarios_run=tuple(ran + part), killed_by=(),
                                 seconds=round(time.monotonic() - began, 1))
            ran += part
            summary = Path(tmp) / "summary.json"
            if not summary.exists():
                raise RuntimeError(f"conformance run wrote no summary (exit {proc.returncode}): {' '.join(argv)}")
            failures = json.loads(summary.read_text(encoding="utf-8"))["failures"]
            if failures:
                return RunResult(status="killed", scenarios_run=tuple(ran),
                                 killed_by=tuple(f"{f['scenario']}: {f['message']}" for f in failures),
                                 seconds=round(time.monotonic() - began, 1))
    return RunResult(status="survived", scenarios_run=tuple(ran), killed_by=(),
                     seconds=round(time.monotonic() - began, 1))
