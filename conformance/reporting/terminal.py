"""Progress on the terminal: one character (or, verbose, one line) per scenario, then the failures and the summary.

Progress rows hold up to 50 characters and end with the count done, the failures so far, the
elapsed time and an estimate of the time left; on a terminal (`live`) the row's status is
rewritten after every scenario, elsewhere (CI logs) each row is written once, when complete.
Verbose lines start with `[done/total]`.

The last line is the summary, exactly ``N passed, N failed`` followed by ``, N errors``,
``, N not implemented`` and ``, N not applicable`` when those are not zero.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from conformance.events import Event, Outcome, RunFinished, RunStarted, ScenarioFinished
from conformance.reporting.model import failure_text, plural, reason

_CHAR = {
    Outcome.PASSED: ".",
    Outcome.FAILED: "F",
    Outcome.ERROR: "E",
    Outcome.KNOWN_FAILURE: "K",
    Outcome.WARNING: "W",
    Outcome.OBSERVATION: "o",
    Outcome.NOT_APPLICABLE: "-",
}
_COLOR = {
    Outcome.PASSED: "32",  # green
    Outcome.FAILED: "31",  # red
    Outcome.ERROR: "35",  # magenta
    Outcome.KNOWN_FAILURE: "33",  # yellow
    Outcome.WARNING: "33",
    Outcome.OBSERVATION: "36",  # cyan
    Outcome.NOT_APPLICABLE: "90",  # grey
}
_BOLD = "1"
_WIDTH = 80
_ROW = 50  # progress characters per row, then the status


class TerminalReporter:
    """Feed it every event with `handle`; it writes as the run goes and the summary at RunFinished."""

    def __init__(self, stream: TextIO, *, verbose: bool = False, color: bool = False, live: bool | None = None,
                 logs: Mapping[tuple[str, str], Path] | None = None,
                 clock: Callable[[], float] = time.monotonic, columns: int | None = None) -> None:
        self._out = stream
        self._verbose = verbose
        self._color = color
        self._live = color if live is None else live  # rewrite the status in place (a terminal)
        self._logs = logs if logs is not None else {}  # (pair, scenario) -> its log file
        self._clock = clock
        # A live row must fit the terminal, or the carriage return lands on its wrapped part.
        self._columns = columns if columns is not None else shutil.get_terminal_size((80, 24)).columns
        self._began = clock()
        self._total = 0
        self._row = ""  # progress characters (painted) of the current row
        self._row_count = 0
        self._results: list[ScenarioFinished] = []
        self._lock = threading.Lock()

    def handle(self, event: Event) -> None:
        with self._lock:  # the runner calls its sinks from several scenario threads
            self._handle(event)

    def _handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._began, self._total = self._clock(), event.scenario_count
            pairs = ", ".join(event.pairs)
            self._write(f"conformance run {event.run_id}: {plural(event.scenario_count, 'scenario')} on {pairs}\n")
        elif isinstance(event, ScenarioFinished):
            self._results.append(event)
            self._progress(event)
        elif isinstance(event, RunFinished):
            self._finish(event)
        self._out.flush()

    # -------------------------------------------------------------------------------- internals

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self._color else text

    def _write(self, text: str) -> None:
        self._out.write(text)

    def _end_progress_line(self) -> None:
        if self._row_count:
            if self._live:
                self._write("\r" + self._row + "  " + self.status() + "\x1b[K\n")
            else:
                self._write(self._row + "  " + self.status() + "\n")
            self._row, self._row_count = "", 0

    def status(self) -> str:
        """`12/210  1 failed  0:41 elapsed, ~2:10 left`."""
        done = len(self._results)
        bad = sum(1 for r in self._results if r.outcome in (Outcome.FAILED, Outcome.ERROR))
        elapsed = max(0.0, self._clock() - self._began)
        width = len(str(self._total or done))
        text = f"{done:>{width}}/{self._total or done}  {bad} failed  {_clock_text(elapsed)} elapsed"
        if 0 < done < self._total:
            text += f", ~{_clock_text(elapsed / done * (self._total - done))} left"
        return text

    def _progress(self, r: ScenarioFinished) -> None:
        if self._verbose:
            status = self._paint(f"{r.outcome.value:<15}", _COLOR[r.outcome])
            width = len(str(self._total or len(self._results)))
            counter = f"[{len(self._results):>{width}}/{self._total or len(self._results)}]"
            line = f"{counter} {status} {r.pair}  {r.scenario}  ({r.duration_s:.2f}s)"
            why = reason(r)
            if why and r.outcome is not Outcome.PASSED:
                line += f": {why}"
            elif r.gap_passed:
                line += "  " + self._paint(f"[{why}]", "33")
            self._write(line + "\n")
            if r.outcome is Outcome.KNOWN_FAILURE and r.message:
                # What actually failed under the declared gap, so a gap cannot hide another bug.
                self._write("".join(f"      {ln}\n" for ln in r.message.splitlines()[:12]))
            return
        self._row += self._paint(_CHAR[r.outcome], _COLOR[r.outcome])
        self._row_count += 1
        full = self._row_count >= _ROW or self._live and self._row_count + 3 + len(self.status()) >= self._columns
        if full:
            self._end_progress_line()
        elif self._live:
            self._write("\r" + self._row + "  " + self.status() + "\x1b[K")

    def _finish(self, event: RunFinished) -> None:
        self._end_progress_line()
        problems = [r for r in self._results if r.outcome in (Outcome.FAILED, Outcome.ERROR)]
        if problems:
            self._write("\n" + self._paint(" FAILURES ".center(_WIDTH, "="), _BOLD) + "\n")
            for r in problems:
                title = f" {r.outcome.value}: {r.scenario} on {r.pair} "
                self._write("\n" + self._paint(title.center(_WIDTH, "_"), f"{_BOLD};{_COLOR[r.outcome]}") + "\n")
                if r.requirements:
                    self._write(f"requirements: {', '.join(r.requirements)}\n")
                self._write(failure_text(r) + "\n")
                log = self._logs.get((r.pair, r.scenario))
                if log is not None:
                    self._write(f"log: {log}\n")
        warned = [r for r in self._results if r.outcome is Outcome.WARNING]
        if warned:
            self._write("\n" + self._paint(" WARNINGS (SHOULD) ".center(_WIDTH, "="), _BOLD) + "\n")
            for r in warned:
                self._write(f"  {r.pair}  {r.scenario}: {reason(r)}\n")
        gaps = [r for r in self._results if r.gap_passed]
        if gaps:
            self._write("\n" + self._paint("Declared gaps that passed (remove from targets.yaml):", f"{_BOLD};33") + "\n")
            for r in gaps:
                reqs = ", ".join(r.requirements) or "-"
                self._write(f"  {r.pair}  {r.scenario}  ({reqs})" + (f": {r.gap_reason}" if r.gap_reason else "") + "\n")
        self._write("\n" + f"run {event.run_id} finished in {event.duration_s:.2f}s\n")
        self._write(self._paint(summary_line(self._results), _BOLD) + "\n")


def _clock_text(seconds: float) -> str:
    """0:41, 12:05, 1:02:05."""
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def summary_line(results: list[ScenarioFinished]) -> str:
    """`N passed, N failed` and, when not zero, errors, known failures, warnings, observations, not applicable."""
    counts = dict.fromkeys(Outcome, 0)
    for r in results:
        counts[r.outcome] += 1
    parts = [f"{counts[Outcome.PASSED]} passed", f"{counts[Outcome.FAILED]} failed"]
    if counts[Outcome.ERROR]:
        parts.append(plural(counts[Outcome.ERROR], "error"))
    if counts[Outcome.KNOWN_FAILURE]:
        parts.append(f"{counts[Outcome.KNOWN_FAILURE]} known failure{'s' if counts[Outcome.KNOWN_FAILURE] != 1 else ''}")
    if counts[Outcome.WARNING]:
        parts.append(plural(counts[Outcome.WARNING], "warning"))
    if counts[Outcome.OBSERVATION]:
        parts.append(plural(counts[Outcome.OBSERVATION], "observation"))
    if counts[Outcome.NOT_APPLICABLE]:
        parts.append(f"{counts[Outcome.NOT_APPLICABLE]} not applicable")
    return ", ".join(parts)
