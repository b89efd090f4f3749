"""Reports: consumers of the runner's event stream (terminal, events.jsonl, JUnit, allure, summary, matrix).

    paths = write_reports(events=events, out_dir=Path("reports"), catalogue=load_catalogue(...))
    events = read_events(Path("reports/events.jsonl"))   # rebuild every report from a finished run

`TerminalReporter` and `AllureWriter` also work live: feed them each event with `handle(event)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from conformance.errors import InputError, Problem
from conformance.events import Event, from_json, to_json
from conformance.reporting.allure import AllureWriter, write_allure
from conformance.reporting.catalogue import Catalogue, Requirement, load_catalogue, parse_catalogue
from conformance.reporting.junit import write_junit
from conformance.reporting.matrix import write_matrix
from conformance.reporting.summary import write_summary
from conformance.reporting.terminal import TerminalReporter, summary_line
from conformance.reporting.timeline import render_timeline
from conformance.verdict import Outcome

__all__ = [
    "AllureWriter",
    "Catalogue",
    "Requirement",
    "TerminalReporter",
    "load_catalogue",
    "parse_catalogue",
    "read_events",
    "render_timeline",
    "summary_line",
    "write_events",
    "write_reports",
]


def write_events(events: Iterable[Event], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for event in events:
            f.write(to_json(event) + "\n")
    return path


def read_events(path: Path) -> list[Event]:
    """The events of an events.jsonl file, in order; blank lines are skipped."""
    events: list[Event] = []
    problems: list[Problem] = []
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                events.append(from_json(line))
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                problems.append(Problem(file=str(path), line=number, what=str(e)))
    if problems:  # a line that is not a conformance event
        raise InputError(problems, subject="an event log (events.jsonl lines that are not conformance events)")
    return events


def write_differential(events: Sequence[Event], out_dir: Path) -> tuple[Path, Path]:
    """The observations of a run's scenarios, by field and worker (conformance.reporting.differential)."""
    from conformance.events import Outcome, ScenarioFinished
    from conformance.reporting.differential import DifferentialReport

    report = DifferentialReport()
    for e in events:
        if not isinstance(e, ScenarioFinished) or e.outcome in (Outcome.ERROR, Outcome.NOT_APPLICABLE):
            continue
        report.compared(sdk=e.worker)
        for fld, text in e.observations:
            report.add(sdk=e.worker, path=fld, reference="(the scenario's expectation)", got=text,
                       source=e.scenario, example={"pair": e.pair, "reproduce": e.reproduce})
    return report.write(out_dir)


def write_reports(*, events: Sequence[Event], out_dir: Path, catalogue: Catalogue,
                  allure: bool = True, failing: frozenset[Outcome] = frozenset()) -> dict[str, Path]:
    """Write every file report of a run into `out_dir`; returns report name -> path.

    Names: events (events.jsonl), junit (junit.xml), allure (allure-results/), summary
    (summary.json), matrix_md (matrix.md), matrix_html (matrix.html), differential_md and
    differential_json (differential.md/.json: the run's observations, differences from the
    reference the contract allows, by field and SDK; never a verdict). `allure=False` leaves allure's
    results to allure-pytest (the pytest path); `failing`: the outcomes the run fails on (`--fail-on`),
    which allure shows as failed.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    events = list(events)
    matrix_md, matrix_html = write_matrix(events, out_dir, catalogue=catalogue)
    differential_md, differential_json = write_differential(events, out_dir)
    written = {
        "differential_md": differential_md,
        "differential_json": differential_json,
        "events": write_events(events, out_dir / "events.jsonl"),
        "junit": write_junit(events, out_dir / "junit.xml", reports=out_dir),
        "summary": write_summary(events, out_dir / "summary.json", catalogue=catalogue),
        "matrix_md": matrix_md,
        "matrix_html": matrix_html,
    }
    if allure:
        written["allure"] = write_allure(events, out_dir / "allure-results", catalogue=catalogue, failing=failing)
    return written
