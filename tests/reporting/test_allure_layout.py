"""Allure results people read: grouped by pair and area (suites), distinct readable titles for fuzz findings."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.events import Outcome, ScenarioFinished, TranscriptEntry
from conformance.reporting.allure import display_name, write_allure
from conformance.reporting.catalogue import load_catalogue

ROOT = Path(__file__).resolve().parents[2]
CUT = "Fuzz finding on durabletask-dapr: differential (actions[].completeWorkflow.failureDetails.errorType=\"TimeoutError\"/\"NonDeterminismError...)"


def _result(scenario: str, title: str, *, requirements=("RPL-DET-001",), outcome=Outcome.FAILED) -> ScenarioFinished:
    entry = TranscriptEntry(t=0.0, channel="worker", direction="request", rpc="GetWorkItems", summary="open")
    return ScenarioFinished(scenario=scenario, pair="reference+durabletask-dapr", sidecar="reference",
                            worker="durabletask-dapr", outcome=outcome, duration_s=0.5, requirements=requirements,
                            title=title, message="x\n\nReproduce with: conformance run ...", transcript=(entry,))


def test_fuzz_finding_titles_are_distinct_and_readable():
    a = _result("regressions/durabletask-dapr-0a1b2c3d4e", CUT)
    b = _result("regressions/durabletask-dapr-9f8e7d6c5b", CUT)
    assert display_name(a) != display_name(b)
    assert display_name(a).startswith("differential on durabletask-dapr [0a1b2c3d4e]: actions[]")
    bare = _result("regressions/durabletask-js-1234567890", "Fuzz finding on durabletask-js: no-answer")
    assert display_name(bare) == "no-answer on durabletask-js [1234567890]"
    plain = _result("timers/durable-timer", "A timer fires once")
    assert display_name(plain) == "A timer fires once"


def test_results_are_grouped_by_pair_then_area_with_transcripts_attached(tmp_path):
    catalogue = load_catalogue(ROOT / "conformance" / "requirements.yaml")
    events = [_result("regressions/durabletask-dapr-0a1b2c3d4e", CUT),
              _result("activities/retry", "Retries", requirements=("ACT-ALO-001",), outcome=Outcome.PASSED)]
    out = write_allure(events, tmp_path / "allure", catalogue=catalogue)
    results = {r["fullName"]: r for r in (json.loads(p.read_text()) for p in out.glob("*-result.json"))}
    finding = results["regressions/durabletask-dapr-0a1b2c3d4e[reference+durabletask-dapr]"]
    labels = {}
    for label in finding["labels"]:
        labels.setdefault(label["name"], []).append(label["value"])
    assert labels["parentSuite"] == ["reference+durabletask-dapr"]
    assert labels["suite"] == [catalogue.get("RPL-DET-001").area] and labels["subSuite"] == ["regressions"]
    assert finding["name"].startswith("differential on durabletask-dapr [0a1b2c3d4e]")
    assert CUT in finding["description"]  # the full generated title is still there
    assert {a["name"] for a in finding["attachments"]} == {"protocol transcript", "protocol transcript (JSON)", "timeline"}
    retry = results["activities/retry[reference+durabletask-dapr]"]
    assert [lb["value"] for lb in retry["labels"] if lb["name"] == "suite"] == [catalogue.get("ACT-ALO-001").area]
