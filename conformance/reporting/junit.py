"""JUnit XML: a testsuite per pair, a testcase per scenario (classname = pair, name = scenario).

FAILED -> <failure>, ERROR -> <error> (message = first line, text = the full failure ending with
"Reproduce with:"), KNOWN_FAILURE / NOT_APPLICABLE -> <skipped message="known failure: why">,
WARNING / OBSERVATION -> a passing case whose <system-out> says what differs.
Each testcase carries its requirement ids as <property name="requirement" .../>; failing ones
also carry the protocol transcript in <system-out> and, given the run's report folder, the log
lines of the engine, worker and adversary in <system-err> (reporting/logs.py).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from conformance.events import Event, Outcome, ScenarioFinished
from conformance.reporting.logs import log_path
from conformance.reporting.model import RunView, failure_text, first_line, transcript_text, xml_safe


_LOG_LINES = 400  # the end of a scenario's log in <system-err>; the file has all of it


def render_junit(events: Iterable[Event], *, reports: Path | None = None) -> str:
    view = RunView.from_events(events)
    root = ET.Element("testsuites", name="conformance")
    totals = _Totals()
    timestamp = datetime.fromtimestamp(view.started_at, UTC).strftime("%Y-%m-%dT%H:%M:%S") if view.started_at else None
    for pair in view.pairs:
        results = [r for r in view.results if r.pair == pair]
        suite = ET.SubElement(root, "testsuite", name=pair)
        t = _Totals.of(results)
        totals.add(t)
        # Scenarios run in parallel: a suite's time is the run's wall time, not the sum of its cases'.
        if view.duration_s:
            t.time = min(t.time, view.duration_s)
        t.apply(suite)
        if timestamp:
            suite.set("timestamp", timestamp)
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="run_id", value=view.run_id)
        for key in ("sidecar", "worker"):
            for value in dict.fromkeys(getattr(r, key) for r in results):
                ET.SubElement(props, "property", name=key, value=xml_safe(value))
        for r in results:
            _testcase(suite, r, reports)
    if view.duration_s:
        totals.time = min(totals.time, view.duration_s)
    totals.apply(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(events: Iterable[Event], path: Path, *, reports: Path | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_junit(events, reports=reports), encoding="utf-8")
    return path


def _testcase(suite: ET.Element, r: ScenarioFinished, reports: Path | None) -> None:
    case = ET.SubElement(suite, "testcase", classname=r.pair, name=r.scenario, time=f"{r.duration_s:.3f}")
    if r.source:
        case.set("file", r.source)
    props = ET.SubElement(case, "properties")
    for rid in r.requirements:
        ET.SubElement(props, "property", name="requirement", value=xml_safe(rid))
    if r.title:
        ET.SubElement(props, "property", name="title", value=xml_safe(r.title))
    if r.gap_passed:
        ET.SubElement(props, "property", name="gap_passed", value="declared gap passed: remove it from targets.yaml")
    if r.outcome in (Outcome.FAILED, Outcome.ERROR):
        text = failure_text(r)
        # The JUnit `type` names are a stable part of the report (CI tools group by them), not class names.
        tag, kind = ("failure", "ConformanceFailure") if r.outcome is Outcome.FAILED else ("error", "ScenarioError")
        el = ET.SubElement(case, tag, message=xml_safe(first_line(text)), type=kind)
        el.text = xml_safe(text)
        if r.transcript:
            ET.SubElement(case, "system-out").text = xml_safe(transcript_text(r.transcript))
        log = log_path(reports, pair=r.pair, scenario=r.scenario) if reports is not None else None
        if log is not None and log.is_file():
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            head = [f"{log} (last {_LOG_LINES} of {len(lines)} lines)"] if len(lines) > _LOG_LINES else [str(log)]
            ET.SubElement(case, "system-err").text = xml_safe("\n".join(head + lines[-_LOG_LINES:]))
    elif r.outcome in (Outcome.KNOWN_FAILURE, Outcome.NOT_APPLICABLE):
        why = r.gap_reason or first_line(r.message) or "no reason given"
        label = "known failure" if r.outcome is Outcome.KNOWN_FAILURE else "not applicable"
        ET.SubElement(case, "skipped", message=xml_safe(f"{label}: {why}"))
    elif r.outcome in (Outcome.WARNING, Outcome.OBSERVATION):
        ET.SubElement(props, "property", name="verdict", value=r.outcome.value)
        ET.SubElement(case, "system-out").text = xml_safe(failure_text(r))


class _Totals:
    def __init__(self) -> None:
        self.tests = self.failures = self.errors = self.skipped = 0
        self.time = 0.0

    @classmethod
    def of(cls, results: list[ScenarioFinished]) -> _Totals:
        t = cls()
        for r in results:
            t.tests += 1
            t.time += r.duration_s
            t.failures += r.outcome is Outcome.FAILED
            t.errors += r.outcome is Outcome.ERROR
            t.skipped += r.outcome in (Outcome.KNOWN_FAILURE, Outcome.NOT_APPLICABLE)
        return t

    def add(self, other: _Totals) -> None:
        self.tests += other.tests
        self.failures += other.failures
        self.errors += other.errors
        self.skipped += other.skipped
        self.time += other.time

    def apply(self, el: ET.Element) -> None:
        for key in ("tests", "failures", "errors", "skipped"):
            el.set(key, str(getattr(self, key)))
        el.set("time", f"{self.time:.3f}")
