"""Failures as data (conformance/failures.py): one Failure per requirement a mismatch weighs on, carried in
the event stream, and one rendering of a scenario's failure text."""

from __future__ import annotations

from conformance.events import Outcome, ScenarioFinished, from_json, to_json
from conformance.reporting.catalogue import load_catalogue
from conformance.failures import Failure, TargetMisbehaved, failures_of, render
from conformance.attribution import judge
from conformance.verdict import CROSS_WORKER, Level, Mismatch, Subject

LEVELS = {"A-MUST-001": "MUST", "B-SHOULD-001": "SHOULD", CROSS_WORKER: "INFO"}


def _failures(found: list[tuple[str, Mismatch]], requirements: tuple[str, ...]) -> tuple[Failure, ...]:
    judged = judge([m for _, m in found], requirements=requirements, levels=LEVELS)
    return failures_of(judged, found, reproduce="conformance run --scenario s")


def test_a_plain_mismatch_is_one_failure_at_one_level():
    # One mismatch, one verdict: it weighs at the strongest level the scenario states, never as a MUST under
    # one requirement and a SHOULD under another.
    found = [("expectations", Mismatch(text="x: expected 1, got 2", location="s.yaml:5", expected="1", got="2"))]
    failures = _failures(found, ("A-MUST-001", "B-SHOULD-001"))
    assert [(f.requirement, f.level) for f in failures] == [("A-MUST-001", Level.MUST)]
    assert all(f.check == "expectations" and f.location == "s.yaml:5" and (f.expected, f.got) == ("1", "2")
               and f.reproduce == "conformance run --scenario s" for f in failures)


def test_render_is_the_sections_worst_first_then_the_reproduce_line():
    found = [("vector", Mismatch(text="actions[0].id: expected 1, got 2", level=Level.OBSERVATION)),
             ("expectations", Mismatch(text="output: expected 1, got 2"))]
    text = render(_failures(found, ("A-MUST-001",)), sources={"A-MUST-001": "spec §1"}, note="\nsidecar log: l",
                  reproduce="conformance run --scenario s")
    assert text == ("FAILED: breaks A-MUST-001 (MUST)\n"
                    "  A-MUST-001: spec §1\n"
                    "  - [expectations] output: expected 1, got 2\n\n"
                    f"OBSERVATION ({CROSS_WORKER}): differs from the reference where the contract allows it\n"
                    f"  {CROSS_WORKER} (INFO): {load_catalogue()[CROSS_WORKER].title}\n"
                    "  - [vector] actions[0].id: expected 1, got 2\n"
                    "sidecar log: l\n\n"
                    "Reproduce with: conformance run --scenario s")


def test_failures_travel_through_events_jsonl():
    failures = _failures([("step", Mismatch(text="s.yaml:7 wait: it is RUNNING", location="s.yaml:7",
                                            expected="COMPLETED", got="RUNNING"))], ("A-MUST-001",))
    event = ScenarioFinished(scenario="s", pair="p", sidecar="a", worker="b", outcome=Outcome.FAILED, duration_s=1.0,
                             requirements=("A-MUST-001",), failures=failures)
    assert from_json(to_json(event)) == event


def test_target_misbehaved_is_the_root_of_findings():
    exc = TargetMisbehaved(check="ledger", mismatches=["lost 1", Mismatch(text="dup", level=Level.OBSERVATION)])
    assert isinstance(exc, AssertionError) and [m.text for m in exc.found] == ["lost 1", "dup"]
    assert str(exc) == "ledger: lost 1; dup"


def test_a_failure_names_the_requirement_and_the_contract_in_english_with_a_link():
    text = render(_failures([("vector", Mismatch(text="expected 1 action(s), got 0: []"))], ("EVT-BUFFER-001",)),
                  sources={}, reproduce="r")
    lines = text.splitlines()
    assert lines[0] == "FAILED: breaks EVT-BUFFER-001 (MUST)"
    assert lines[1] == "  EVT-BUFFER-001 (MUST): Events that arrive before the wait are buffered by the worker"
    assert lines[2].startswith("    An EventRaised recorded before the code waits")
    # The spec's English words where the catalogue quotes its Chinese heading and phrase, and where to read them.
    assert lines[3].startswith("    The contract, State and history: 3. 收件箱 — Inbox (pending events):")
    assert "external events raised to the workflow" in lines[3]
    assert lines[4].startswith("      docs/spec.md#状态与历史--state-and-history (line ")
    assert lines[5].startswith("    Cited as: seed 000 §状态与历史")


def test_a_must_weighed_as_a_should_says_so_once():
    text = render(_failures([("vector", Mismatch(text="no answer", level=Level.SHOULD, subject=Subject.ANSWER))], ("RPL-ANSWER-001",)),
                  sources={}, reproduce="r")
    assert text.startswith("WARNING: RPL-ANSWER-001 — a MUST in the catalogue, weighed as a SHOULD")
    assert "WARNING: WARNING" not in text and "(SHOULD)" not in text.splitlines()[0]
