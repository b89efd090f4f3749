"""Every report written from one synthetic event stream (tests/reporting/synthetic.py)."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance.errors import InputError
from conformance.events import Outcome, RunStarted, ScenarioFinished, TranscriptEntry
from conformance.reporting import (
    TerminalReporter,
    load_catalogue,
    parse_catalogue,
    read_events,
    render_timeline,
    write_reports,
)
from conformance.reporting.matrix import Matrix, render_matrix_html, render_matrix_md

from . import synthetic
from .synthetic import GO, REF

SUMMARY_LINE = "7 passed, 1 failed, 1 error, 1 known failure, 1 not applicable"


@pytest.fixture
def catalogue(tmp_path):
    path = tmp_path / "requirements.yaml"
    path.write_text(synthetic.CATALOGUE_YAML, encoding="utf-8")
    return load_catalogue(path)


@pytest.fixture
def reports(tmp_path, catalogue) -> dict[str, Path]:
    return write_reports(events=synthetic.events(), out_dir=tmp_path / "reports", catalogue=catalogue)


# --------------------------------------------------------------------------------- catalogue


def test_catalogue_loads_requirements_in_order(catalogue):
    assert [r.id for r in catalogue] == ["ACT-ALO-001", "ACT-TOK-002", "RPL-DET-001", "RPL-PAT-002", "PAY-SIZ-001", "TMR-FIR-001"]
    tok = catalogue["ACT-TOK-002"]
    assert (tok.level, tok.area, tok.applies_to) == ("MUST", "activities", "engine")
    assert tok.engines_differ == {"durabletask-go": "accepts the stale completion (no tokens)"}
    assert tok.line == 9
    assert list(catalogue.areas()) == ["activities", "replay", "payloads", "timers"]
    assert "XTR-UNK-001" not in catalogue and catalogue.get("XTR-UNK-001") is None
    hash(tok)  # frozen and hashable despite the mapping field


def test_catalogue_error_lists_every_problem():
    text = """\
requirements:
  - id: A-1
    title: one
    text: t
    level: MUST
    area: a
    applies_to: engine
    source: s
  - id: A-1
    title: again
    text: t
    level: MUSTN'T
    area: a
    applies_to: sidecar
    source: s
  - id: B-2
    text: t
    level: MAY
    area: a
    source: s
    colour: blue
  - just a string
"""
    with pytest.raises(InputError) as info:
        parse_catalogue(text, source="req.yaml")
    problems = info.value.problems
    assert len(problems) == 6, problems
    msg = str(info.value)
    assert msg.startswith("6 problems in the requirement catalogue req.yaml:\n")
    assert "req.yaml:9: requirements[1] (A-1): duplicate id 'A-1' (first defined at req.yaml:2)" in msg
    assert 'req.yaml:9: requirements[1] (A-1): bad level "MUSTN\'T"; one of MUST, SHOULD, MAY' in msg
    assert "bad applies_to 'sidecar'; one of engine, worker, both" in msg
    assert "req.yaml:16: requirements[2] (B-2): missing key(s) title, applies_to" in msg
    assert "unknown key(s) colour; known: id, title, text, level, area, applies_to, source, engines_differ" in msg
    assert "req.yaml:22: requirements[3]: must be a mapping, not str" in msg


def test_catalogue_rejects_a_file_without_requirements(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("- id: X\n", encoding="utf-8")
    with pytest.raises(InputError, match="top level must be a mapping with the key 'requirements'"):
        load_catalogue(path)
    with pytest.raises(InputError, match="cannot read the file"):
        load_catalogue(tmp_path / "missing.yaml")


# ------------------------------------------------------------------------------- write_reports


def test_write_reports_returns_every_report(reports):
    assert set(reports) == {"events", "junit", "allure", "summary", "matrix_md", "matrix_html", "differential_md",
                            "differential_json"}
    for name, path in reports.items():
        assert path.exists(), name
    assert reports["allure"].is_dir()


def test_events_round_trip_through_read_events(reports):
    assert read_events(reports["events"]) == synthetic.events()


def test_read_events_names_bad_lines(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text('{"kind": "run_started"}\n\n{"kind": "nope"}\n', encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_events(path)
    assert f"{path}:1:" in str(info.value) and f"{path}:3: not a conformance event: kind 'nope'" in str(info.value)


# ----------------------------------------------------------------------------------------- junit


def test_junit_counts_and_elements(reports):
    root = ET.parse(reports["junit"]).getroot()
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "11",
        "failures": "1",
        "errors": "1",
        "skipped": "2",
    }
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == [REF, GO]
    assert {k: suites[REF].get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "6",
        "failures": "0",
        "errors": "0",
        "skipped": "0",
    }
    assert {k: suites[GO].get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5",
        "failures": "1",
        "errors": "1",
        "skipped": "2",
    }

    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert len(cases) == 11
    failed = cases[(GO, "activities/at-least-once")]
    failure = failed.find("failure")
    assert failure.get("message") == "activities/at-least-once on durabletask-go+dapr-python: 2 mismatches"
    assert failure.text.rstrip().endswith("--pair durabletask-go+dapr-python") and "Reproduce with:" in failure.text
    assert "[FAULT: drop]" in failed.find("system-out").text
    assert [p.get("value") for p in failed.iter("property") if p.get("name") == "requirement"] == ["ACT-ALO-001"]
    assert cases[(GO, "replay/patch-mismatch")].find("error").get("message").startswith("the sidecar exited with status 2")
    assert (
        cases[(GO, "activities/stale-token")].find("skipped").get("message") == "known failure: durabletask-go has no completion tokens"
    )
    assert cases[(GO, "payloads/oversized")].find("skipped").get("message") == "not applicable: the pair lacks the capability max_payload"
    both = [p.get("value") for p in cases[(REF, "activities/stale-token")].iter("property") if p.get("name") == "requirement"]
    assert both == ["ACT-TOK-002", "ACT-ALO-001"]
    assert cases[(REF, "activities/at-least-once")].find("failure") is None
    assert cases[(REF, "activities/at-least-once")].get("file") == "scenarios/activities/at-least-once.yaml"


# ---------------------------------------------------------------------------------------- allure


def _allure_results(directory: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for path in directory.glob("*-result.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert path.name.endswith("-result.json") and data["uuid"]
        # Parameters as allure's API writes them (a value's repr), in both paths.
        params = {p["name"]: p["value"] for p in data["parameters"]}
        assert params["pair"] == repr(_label(data, "parentSuite")[0]), params
        out[(_label(data, "parentSuite")[0], _label(data, "story")[0])] = data
    return out


def _label(result: dict, name: str) -> list[str]:
    return [lb["value"] for lb in result["labels"] if lb["name"] == name]


def test_allure_results_statuses_and_labels(reports):
    results = _allure_results(reports["allure"])
    assert len(results) == 11
    statuses = {key: r["status"] for key, r in results.items()}
    assert statuses[(GO, "activities/at-least-once")] == "failed"
    assert statuses[(GO, "replay/patch-mismatch")] == "broken"
    assert statuses[(GO, "activities/stale-token")] == "skipped"
    assert statuses[(GO, "payloads/oversized")] == "skipped"
    assert sorted(statuses.values()).count("passed") == 7

    failed = results[(GO, "activities/at-least-once")]
    assert _label(failed, "parentSuite") == [GO] and _label(failed, "suite") == ["activities"]
    assert _label(failed, "feature") == ["activities"]
    assert _label(failed, "tag") == ["ACT-ALO-001"]
    assert _label(failed, "severity") == ["critical"]
    assert failed["name"] == "A dropped completion is redelivered"
    assert failed["statusDetails"]["message"].splitlines()[-1].strip().startswith("python -m conformance run")
    assert failed.get("links", []) == [] and failed["stage"] == "finished" and failed["stop"] - failed["start"] == 30200

    stale = results[(REF, "activities/stale-token")]
    assert _label(stale, "tag") == ["ACT-TOK-002", "ACT-ALO-001"]
    assert _label(results[(REF, "replay/patch-mismatch")], "severity") == ["normal"]
    assert "gap-passed" in _label(results[(REF, "replay/patch-mismatch")], "tag")
    assert _label(results[(REF, "payloads/oversized")], "severity") == ["minor"]
    assert _label(results[(REF, "extra/uncatalogued")], "feature") == ["(not in the catalogue)"]
    assert results[(GO, "activities/stale-token")]["statusDetails"]["message"] == "known failure: durabletask-go has no completion tokens"
    assert results[(GO, "payloads/oversized")]["statusDetails"]["message"].startswith("not applicable: ")
    assert len({r["uuid"] for r in results.values()}) == 11
    assert len({r["historyId"] for r in results.values()}) == 11


def test_allure_attachments_exist_and_parse(reports):
    directory = reports["allure"]
    failed = _allure_results(directory)[(GO, "activities/at-least-once")]
    by_type = {a["type"]: directory / a["source"] for a in failed["attachments"]}
    assert set(by_type) == {"text/plain", "application/json", "image/svg+xml"}
    text = by_type["text/plain"].read_text(encoding="utf-8").splitlines()
    assert text[0] == "+0.000s worker request GetWorkItems open the work-item stream"
    assert '+0.098s worker request CompleteActivityTask task 2 result "charged"  [FAULT: drop]' in text
    transcript = json.loads(by_type["application/json"].read_text(encoding="utf-8"))
    assert len(transcript) == len(text) and transcript[13]["fault"] == "drop"
    svg = ET.parse(by_type["image/svg+xml"]).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert "#dc2626" in by_type["image/svg+xml"].read_text(encoding="utf-8")  # the fault is drawn in red
    for result in _allure_results(directory).values():
        for attachment in result.get("attachments", []):
            assert (directory / attachment["source"]).is_file()
    assert _allure_results(directory)[(REF, "payloads/oversized")].get("attachments", []) == []


def test_allure_environment_and_categories(reports):
    directory = reports["allure"]
    env = (directory / "environment.properties").read_text(encoding="utf-8")
    assert f"run_id = {synthetic.RUN_ID}\n" in env
    assert f"pairs = {REF}, {GO}\n" in env
    categories = json.loads((directory / "categories.json").read_text(encoding="utf-8"))
    assert [c["matchedStatuses"] for c in categories] == [["failed"], ["broken"], ["skipped"], ["skipped"]]
    assert re.fullmatch(categories[2]["messageRegex"], "known failure: x\ny")


def test_allure_directory_is_cleaned_of_an_earlier_run(tmp_path, catalogue):
    out = tmp_path / "reports"
    write_reports(events=synthetic.events(), out_dir=out, catalogue=catalogue)
    (out / "allure-results" / "keep-me.txt").write_text("not ours", encoding="utf-8")
    write_reports(events=synthetic.events()[:3], out_dir=out, catalogue=catalogue)
    assert len(list((out / "allure-results").glob("*-result.json"))) == 1
    assert (out / "allure-results" / "keep-me.txt").exists()


# --------------------------------------------------------------------------------------- summary


def test_summary_json(reports):
    summary = json.loads(reports["summary"].read_text(encoding="utf-8"))
    assert summary["run_id"] == synthetic.RUN_ID
    assert summary["started_at"] == synthetic.STARTED_AT and summary["duration_s"] == 41.7
    assert summary["started"] == "2025-01-01T12:00:00+00:00"
    assert summary["pairs"] == [REF, GO]
    assert summary["counts"] == {"PASSED": 7, "FAILED": 1, "ERROR": 1, "KNOWN_FAILURE": 1, "WARNING": 0, "OBSERVATION": 0, "NOT_APPLICABLE": 1, "total": 11}
    assert summary["per_pair"][REF] == {"PASSED": 6, "FAILED": 0, "ERROR": 0, "KNOWN_FAILURE": 0, "WARNING": 0, "OBSERVATION": 0, "NOT_APPLICABLE": 0}
    assert summary["per_pair"][GO] == {"PASSED": 1, "FAILED": 1, "ERROR": 1, "KNOWN_FAILURE": 1, "WARNING": 0, "OBSERVATION": 0, "NOT_APPLICABLE": 1}
    got = {(rid, pair): status for rid, by_pair in summary["requirements"].items() for pair, status in by_pair.items()}
    assert got == synthetic.EXPECTED_CELLS
    assert summary["failures"] == [
        {
            "scenario": "activities/at-least-once",
            "pair": GO,
            "outcome": "FAILED",
            "requirements": ["ACT-ALO-001"],
            "broken": [],
            "message": "activities/at-least-once on durabletask-go+dapr-python: 2 mismatches",
            "incidents": [],
            "reproduce": "python -m conformance run scenarios/activities/at-least-once.yaml --pair durabletask-go+dapr-python",
        },
        {
            "scenario": "replay/patch-mismatch",
            "pair": GO,
            "outcome": "ERROR",
            "requirements": ["RPL-PAT-002"],
            "broken": [],
            "message": "the sidecar exited with status 2 during the scenario (stderr tail: panic: nil map)",
            "incidents": [],
            "reproduce": "python -m conformance run scenarios/replay/patch-mismatch.yaml --pair durabletask-go+dapr-python",
        },
    ]
    assert summary["gaps_passed"] == [
        {
            "scenario": "replay/patch-mismatch",
            "pair": REF,
            "requirements": ["RPL-PAT-002"],
            "reason": "patch mismatch not detected yet (issue 12)",
        }
    ]


# ---------------------------------------------------------------------------------------- matrix


def test_matrix_cells_follow_the_precedence(catalogue):
    matrix = Matrix.build(synthetic.events(), catalogue=catalogue)
    got = {(row.id, pair): matrix.cell(row.id, pair).status.value for row in matrix.rows for pair in matrix.pairs}
    assert got == synthetic.EXPECTED_CELLS
    assert [row.id for row in matrix.rows][-1] == "XTR-UNK-001"
    assert matrix.column_counts(GO)["FAILED"] == 1


def test_matrix_md_rows(reports):
    md = reports["matrix_md"].read_text(encoding="utf-8")
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and re.fullmatch(r"[A-Z]+-[A-Z]+-\d+", cells[0]):
            rows[cells[0]] = cells
    assert set(rows) == {rid for rid, _ in synthetic.EXPECTED_CELLS}
    status_word = {
        "PASSED": "passed",
        "FAILED": "FAILED",
        "ERROR": "ERROR",
        "KNOWN_FAILURE": "known failure",
        "NOT_APPLICABLE": "not applicable",
        "UNCOVERED": "uncovered",
    }
    for (rid, pair), status in synthetic.EXPECTED_CELLS.items():
        cell = rows[rid][3 + [REF, GO].index(pair)]
        assert status_word[status] in cell, (rid, pair, cell)
    assert rows["RPL-PAT-002"][3].endswith("(declared gap passed)")
    assert rows["ACT-ALO-001"][1:3] == ["MUST", "Activities are delivered at least once"]
    assert "## timers" in md and "## (not in the catalogue)" in md
    assert "  - `activities/at-least-once` FAILED: activities/at-least-once on durabletask-go+dapr-python: 2 mismatches" in md
    assert "  - `activities/stale-token` KNOWN_FAILURE: durabletask-go has no completion tokens" in md


class _Cells(HTMLParser):
    """Collects data-status per (row id, column index) and the text of the whole page."""

    def __init__(self) -> None:
        super().__init__()
        self.row: str | None = None
        self.col = 0
        self.cells: dict[tuple[str, int], str] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self.row, self.col = a.get("id"), 0
        elif tag == "td" and self.row and "data-status" in a:
            self.cells[(self.row, self.col)] = a["data-status"]
            self.col += 1

    def handle_data(self, data):
        self.text.append(data)


def test_matrix_html_rows(reports):
    html = reports["matrix_html"].read_text(encoding="utf-8")
    assert "<link" not in html and "<script src" not in html and "http" not in html.split("<body>")[0]  # self-contained
    parser = _Cells()
    parser.feed(html)
    for (rid, pair), status in synthetic.EXPECTED_CELLS.items():
        assert parser.cells[(rid, [REF, GO].index(pair))] == status, (rid, pair)
    text = "".join(parser.text)
    assert "durabletask-go has no completion tokens" in text
    assert "the pair lacks the capability max_payload" in text
    assert "Durable timers fire at their due time" in text
    for word in ("passed", "FAILED", "ERROR", "known failure", "not applicable", "uncovered"):
        assert word in text  # legend


def test_matrix_renders_without_a_run_id(catalogue):
    events = [e for e in synthetic.events() if isinstance(e, ScenarioFinished)]
    matrix = Matrix.build(events, catalogue=catalogue)
    assert "Conformance matrix" in render_matrix_md(matrix) and "</html>" in render_matrix_html(matrix)


# -------------------------------------------------------------------------------------- terminal


class _Clock:
    """A clock the test moves: 2.5 s per scenario finished."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _terminal(verbose: bool, color: bool = False, live: bool = False) -> str:
    out = io.StringIO()
    clock = _Clock()
    reporter = TerminalReporter(out, verbose=verbose, color=color, live=live, clock=clock)
    for event in synthetic.events():
        if isinstance(event, ScenarioFinished):
            clock.now += 2.5
        reporter.handle(event)
    return out.getvalue()


def test_terminal_progress_failures_and_summary():
    text = _terminal(verbose=False)
    lines = text.splitlines()
    assert lines[0].startswith(f"conformance run {synthetic.RUN_ID}: 11 scenarios on {REF}, {GO}")
    assert lines[1] == "......FK.E-  11/11  2 failed  0:28 elapsed"  # F and E count as failed
    assert text.endswith(SUMMARY_LINE + "\n")
    assert lines[-2] == f"run {synthetic.RUN_ID} finished in 41.70s"
    assert text.count("Reproduce with:") == 2
    failure_at = text.index("FAILED: activities/at-least-once on durabletask-go+dapr-python")
    assert text.index("--pair durabletask-go+dapr-python", failure_at) < text.index("ERROR: replay/patch-mismatch")
    gaps = text.index("Declared gaps that passed (remove from targets.yaml):")
    assert f"  {REF}  replay/patch-mismatch  (RPL-PAT-002): patch mismatch not detected yet (issue 12)" in text[gaps:]


def test_terminal_verbose_lines():
    lines = _terminal(verbose=True).splitlines()
    assert re.match(rf"\[ ?\d+/11\] KNOWN_FAILURE   {re.escape(GO)}  activities/stale-token  \(0.00s\): durabletask-go has no "
                    "completion tokens$", next(ln for ln in lines if "stale-token" in ln and GO in ln))
    assert f"] PASSED          {REF}  replay/patch-mismatch  (0.21s)  [declared gap passed: remove it from targets.yaml]" \
        in {ln[6:] for ln in lines}
    assert lines[1].startswith("[ 1/11] ")
    assert lines[-1] == SUMMARY_LINE


def test_terminal_status_counts_failures_so_far_and_estimates_the_rest():
    out = io.StringIO()
    clock = _Clock()
    reporter = TerminalReporter(out, verbose=False, color=False, live=False, clock=clock)
    events = synthetic.events()
    reporter.handle(events[0])
    finished = [e for e in events if isinstance(e, ScenarioFinished)]
    failed = next(e for e in finished if e.outcome is Outcome.FAILED)
    passed = next(e for e in finished if e.outcome is Outcome.PASSED)
    for i in range(3):
        clock.now += 10
        reporter.handle(failed if i == 1 else passed)
    assert reporter.status() == " 3/11  1 failed  0:30 elapsed, ~1:20 left"
    assert out.getvalue().count("\n") == 1  # not a terminal: nothing but the header until a row is complete


def test_terminal_rows_are_written_whole_for_logs_and_live_on_a_terminal():
    out = io.StringIO()
    clock = _Clock()
    reporter = TerminalReporter(out, verbose=False, color=False, live=False, clock=clock)
    events = synthetic.events()
    reporter.handle(RunStarted(run_id="r", started_at=0.0, pairs=(REF,), scenario_count=120, command="c"))
    passed = next(e for e in events if isinstance(e, ScenarioFinished) and e.outcome is Outcome.PASSED)
    for _ in range(120):
        clock.now += 1
        reporter.handle(passed)
    rows = out.getvalue().splitlines()[1:]
    assert rows == ["." * 50 + "   50/120  0 failed  0:50 elapsed, ~1:10 left",
                    "." * 50 + "  100/120  0 failed  1:40 elapsed, ~0:20 left"]
    live = _terminal(verbose=False, live=True)
    assert "\r......FK   8/11  1 failed  0:20 elapsed, ~0:08 left\x1b[K" in live
    assert live.split("\n")[1].endswith("......FK.E-  11/11  2 failed  0:28 elapsed\x1b[K")
    # On a narrow terminal a live row ends before it would wrap.
    out = io.StringIO()
    narrow = TerminalReporter(out, live=True, clock=clock, columns=50)
    narrow.handle(RunStarted(run_id="r", started_at=0.0, pairs=(REF,), scenario_count=120, command="c"))
    for _ in range(30):
        narrow.handle(passed)
    assert all(len(row.split("\r")[-1].removesuffix("\x1b[K")) < 50 for row in out.getvalue().split("\n")[1:-1])


def test_terminal_summary_omits_zero_counts_and_colours_on_request():
    out = io.StringIO()
    reporter = TerminalReporter(out, verbose=False, color=True)
    events = synthetic.events()
    for event in [events[0], *[e for e in events if isinstance(e, ScenarioFinished) and e.outcome is Outcome.PASSED], events[-1]]:
        reporter.handle(event)
    last = out.getvalue().splitlines()[-1]
    assert re.sub(r"\x1b\[[0-9;]*m", "", last) == "7 passed, 0 failed"
    assert "\x1b[32m.\x1b[0m" in out.getvalue()


# -------------------------------------------------------------------------------------- timeline


def test_timeline_for_200_messages_is_compact_valid_svg():
    transcript = synthetic.fan_out_transcript(64)
    assert len(transcript) >= 195
    svg = render_timeline(transcript, title="replay/determinism")
    root = ET.fromstring(svg)
    height = int(root.get("height"))
    assert height < 16 * len(transcript) + 400  # rows are compressed
    assert svg.count("<line") >= len(transcript)


def test_timeline_marks_drops_and_escapes_text():
    transcript = (
        TranscriptEntry(t=0.0, channel="worker", direction="request", rpc="CompleteActivityTask", summary="<b>&\x01", fault="drop"),
        TranscriptEntry(t=2.5, channel="client", direction="response", rpc="GetInstance", summary="x", status="NOT_FOUND"),
    )
    svg = render_timeline(transcript)
    ET.fromstring(svg)  # escaped, control characters replaced
    assert "✗ drop" in svg and "NOT_FOUND" in svg and "2.50 s later" in svg
    ET.fromstring(render_timeline(()))


def test_terminal_reporter_takes_events_from_several_threads():
    from concurrent.futures import ThreadPoolExecutor

    out = io.StringIO()
    reporter = TerminalReporter(out, verbose=False, color=False)
    events = synthetic.events()
    reporter.handle(events[0])
    middle = [e for e in events if isinstance(e, ScenarioFinished)] * 20
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(reporter.handle, middle))
    reporter.handle(events[-1])
    rows = out.getvalue().split("\n\n")[0].splitlines()[1:]
    assert len(rows) == 5  # 220 scenarios: 4 rows of 50, one of 20
    progress = "".join(line.split("  ")[0] for line in rows)
    assert len(progress) == len(middle) and set(progress) == set(".FKE-")
    assert out.getvalue().endswith("140 passed, 20 failed, 20 errors, 20 known failures, 20 not applicable\n")


def test_transcript_lines_do_not_repeat_the_rpc_name():
    from conformance.reporting.model import transcript_line

    entry = TranscriptEntry(t=0.25, channel="worker", direction="response", rpc="Hello", summary="Hello → OK  Empty", status="OK")
    assert transcript_line(entry) == "+0.250s worker response Hello → OK Empty"
    failed = TranscriptEntry(
        t=1, channel="client", direction="response", rpc="GetInstance", summary="x", status="NOT_FOUND", fault="delay 2s"
    )
    assert transcript_line(failed) == "+1.000s client response GetInstance x  [status: NOT_FOUND]  [FAULT: delay 2s]"
    assert transcript_line(TranscriptEntry(t=0, channel="client", direction="request", rpc="Hello", summary="Hello")) == (
        "+0.000s client request Hello"
    )


def test_the_differential_report_gathers_a_runs_observations(tmp_path):
    from dataclasses import replace

    events = synthetic.events()
    i = next(i for i, e in enumerate(events) if isinstance(e, ScenarioFinished))
    events[i] = replace(events[i], outcome=Outcome.OBSERVATION,
                        observations=(("ScheduleTask.id", "actions[0].ScheduleTask.id: expected 1, got 0"),))
    written = write_reports(events=events, out_dir=tmp_path, catalogue=load_catalogue())
    doc = json.loads(written["differential_json"].read_text(encoding="utf-8"))
    rows = [(d["field"], d["sdk"], d["count"]) for d in doc["differences"]]
    assert rows == [("ScheduleTask.id", events[i].worker, 1)]
    assert "ScheduleTask.id" in written["differential_md"].read_text(encoding="utf-8")


def test_a_failed_html_cell_lists_failures_first_with_their_reproduce_line(reports):
    html = reports["matrix_html"].read_text(encoding="utf-8")
    # The scenario's id links to its file.
    cell = html[html.index("activities/at-least-once</code></a> FAILED"):]
    cell = cell[:cell.index("</td>")]
    assert '<code class="repro">python -m conformance run scenarios/activities/at-least-once.yaml --pair ' in cell


def test_matrix_cells_count_failed_of_covering_say_a_gap_once_and_link_passing_scenarios(catalogue, tmp_path):
    from conformance.events import RunStarted
    from conformance.reporting.matrix import Matrix, render_matrix_html, render_matrix_md

    def result(name: str, outcome: Outcome, **kw) -> ScenarioFinished:
        return ScenarioFinished(scenario=name, pair="reference+sdk", sidecar="reference", worker="sdk",
                                outcome=outcome, duration_s=0.1, requirements=("RPL-DET-001",),
                                source=str(tmp_path / f"{name}.yaml"), **kw)

    events = [RunStarted(run_id="r", started_at=0.0, pairs=("reference+sdk",), scenario_count=5, command="c"),
              result("a", Outcome.FAILED, message="FAILED: breaks RPL-DET-001 (MUST)", reproduce="x " * 80),
              *(result(n, Outcome.KNOWN_FAILURE, gap_reason="declared gap RPL-DET-001: the same reason")
                for n in ("b", "c", "d")),
              result("e", Outcome.PASSED), result("f", Outcome.WARNING, message="WARNING: does not meet X")]
    matrix = Matrix.build(events, catalogue=catalogue)
    md = render_matrix_md(matrix)
    assert "1 pair" in md and "1 pairs" not in md
    assert "FAILED (1 of 6 scenarios)" in md
    assert md.count("the same reason") == 1 and "`b`, `c`, `d` KNOWN_FAILURE" in md
    assert "WARNING: WARNING" not in md and "`f` WARNING: does not meet X" in md
    html = render_matrix_html(matrix)
    assert "FAILED · 1 of 6 scenarios" in html
    assert f'<a href="{(tmp_path / "e.yaml").as_uri()}"><code>e</code></a>' in html
    assert "overflow-wrap: anywhere" in html  # long reproduce commands wrap inside their cell


def test_junit_cases_carry_their_own_wall_time_and_suites_the_runs():
    from conformance.events import RunFinished
    from conformance.reporting.junit import render_junit

    events = [RunStarted(run_id="r", started_at=0.0, pairs=("p",), scenario_count=3, command="c"),
              *(ScenarioFinished(scenario=f"s{i}", pair="p", sidecar="a", worker="b", outcome=Outcome.PASSED,
                                 duration_s=10.0, requirements=()) for i in range(3)),
              RunFinished(run_id="r", finished_at=12.0, duration_s=12.0, counts={})]
    root = ET.fromstring(render_junit(events))
    assert root.get("time") == "12.000" and root.find("testsuite").get("time") == "12.000"  # not 30 s
    assert [c.get("time") for c in root.iter("testcase")] == ["10.000"] * 3
