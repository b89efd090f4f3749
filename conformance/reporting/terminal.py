"""Progress on the terminal: one character (or, verbose, one line) per scenario, then the failures and the summary.

The last line is the summary, exactly ``N passed, N failed`` followed by ``, N errors``,
``, N not implemented`` and ``, N not applicable`` when those are not zero.
"""

from __future__ import annotations

import threading
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


class TerminalReporter:
    """Feed it every event with `handle`; it writes as the run goes and the summary at RunFinished."""

    def __init__(self, stream: TextIO, *, verbose: bool = False, color: bool = False) -> None:
        self._out = stream
        self._verbose = verbose
        self._color = color
        self._column = 0  # characters on the current progress line
        self._results: list[ScenarioFinished] = []
        self._lock = threading.Lock()

    def handle(self, event: Event) -> None:
        with self._lock:  # the runner calls its sinks from several scenario threads
            self._handle(event)

    def _handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
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
        if self._column:
            self._write("\n")
            self._column = 0

    def _progress(self, r: ScenarioFinished) -> None:
        if self._verbose:
            status = self._paint(f"{r.outcome.value:<15}", _COLOR[r.outcome])
            line = f"{status} {r.pair}  {r.scenario}  ({r.duration_s:.2f}s)"
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
        if self._column >= _WIDTH:
            self._end_progress_line()
        self._write(self._paint(_CHAR[r.outcome], _COLOR[r.outcome]))
        self._column += 1

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
