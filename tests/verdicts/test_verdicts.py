"""Verdicts come from the contract: how mismatches become FAILED, WARNING or OBSERVATION."""

from __future__ import annotations

import pytest

from conformance.cli import _fail_on, failing_outcomes
from conformance.events import Outcome, ScenarioFinished, from_json, to_json
from conformance.reporting.catalogue import load_catalogue
from conformance.reporting.model import CellStatus, RunView
from conformance.verdict import CROSS_WORKER, Level, Mismatch, Verdict, classify_answer_mismatch, judge

LEVELS = {"R-MUST": "MUST", "R-SHOULD": "SHOULD", "R-MAY": "MAY", "R-INFO": "INFO"}


def test_a_plain_mismatch_takes_the_level_of_each_requirement() -> None:
    j = judge([Mismatch(text="x")], requirements=["R-MUST", "R-SHOULD", "R-INFO"], levels=LEVELS)
    assert dict(j.per_requirement) == {"R-MUST": Verdict.FAILED, "R-SHOULD": Verdict.WARNING,
                                       "R-INFO": Verdict.OBSERVATION}
    assert j.outcome is Verdict.FAILED and j.broken == ("R-MUST",)


def test_only_a_should_warns_and_only_an_info_observes() -> None:
    assert judge([Mismatch(text="x")], requirements=["R-SHOULD"], levels=LEVELS).outcome is Verdict.WARNING
    assert judge([Mismatch(text="x")], requirements=["R-MAY"], levels=LEVELS).outcome is Verdict.OBSERVATION


def test_an_observation_never_fails_a_must_scenario() -> None:
    j = judge([Mismatch(text="ids differ", level=Level.OBSERVATION)], requirements=["R-MUST"], levels=LEVELS)
    assert j.outcome is Verdict.OBSERVATION
    assert dict(j.per_requirement) == {"R-MUST": Verdict.PASSED, CROSS_WORKER: Verdict.OBSERVATION}
    assert j.broken == ()


def test_a_named_requirement_is_the_one_broken() -> None:
    j = judge([Mismatch(text="x", requirement="R-MUST")], requirements=["R-MUST", "R-SHOULD"], levels=LEVELS)
    assert dict(j.per_requirement) == {"R-MUST": Verdict.FAILED, "R-SHOULD": Verdict.PASSED}


def test_an_uncatalogued_requirement_is_not_excused() -> None:
    assert judge([Mismatch(text="x")], requirements=["NOPE-001"], levels=LEVELS).outcome is Verdict.FAILED


def test_no_mismatch_passes() -> None:
    j = judge([], requirements=["R-MUST"], levels=LEVELS)
    assert j.outcome is Verdict.PASSED and j.sections == ()


def test_requirements_with_the_same_mismatches_share_one_section() -> None:
    j = judge([Mismatch(text="a"), Mismatch(text="b")], requirements=["R-MUST", "R-MAY"], levels=LEVELS)
    assert [(s.verdict, s.requirements, s.texts) for s in j.sections] == [
        (Verdict.FAILED, ("R-MUST",), ("a", "b")), (Verdict.OBSERVATION, ("R-MAY",), ("a", "b"))]
    assert j.sections[0].heading == "FAILED: breaks R-MUST (MUST)"


@pytest.mark.parametrize("text", [
    "actions[0].ScheduleTask.id: expected 1, got 0",
    "actions[0].ScheduleTask.taskExecutionId: missing (expected 'x')",
    "actions[1].CreateChildWorkflow.instanceId: expected 'p:0001', got 'b3f0'",
    "actions[0].CreateTimer.name: expected absent, got 'timer'",
    "actions[0].CompleteWorkflow.failureDetails.errorType: expected 'TaskFailedError', got 'java.lang.X'",
    "actions[0].CreateTimer.origin: missing (expected {'createTimer': {}})",
    "actions[0].CompleteWorkflow.customStatus: expected absent, got ''",
    "actions[0].CreateTimer.fireAt: expected '2026-01-01T00:00:01.000500Z', got '2026-01-01T00:00:01Z'",
])
def test_the_workers_own_choices_are_observations(text: str) -> None:
    assert classify_answer_mismatch(text).level is Level.OBSERVATION


@pytest.mark.parametrize("text", [
    "actions[0].ScheduleTask.name: expected 'echo', got 'Echo'",
    "actions[0].ScheduleTask.input: expected 0, got None",
    "actions[0].CompleteWorkflow.workflowStatus: expected 'ORCHESTRATION_STATUS_COMPLETED', got 'ORCHESTRATION_STATUS_FAILED'",
    "actions[0].CompleteWorkflow.carryoverEvents[0].eventRaised.name: expected 'B', got 'b'",
    "actions[0].CreateTimer.fireAt: expected '2026-01-01T00:00:05Z', got '2026-01-01T00:00:01Z'",
    "expected 2 action(s), got 1: []",
])
def test_the_programs_semantics_keep_the_scenarios_level(text: str) -> None:
    assert classify_answer_mismatch(text).level is None


def test_fail_on_adds_outcomes_to_the_failing_set() -> None:
    assert failing_outcomes() == {"FAILED", "ERROR"}
    assert failing_outcomes([_fail_on("should,known")]) == {"FAILED", "ERROR", "WARNING", "KNOWN_FAILURE"}
    with pytest.raises(Exception, match="unknown level 'nope'"):
        _fail_on("nope")


def _result(**kw) -> ScenarioFinished:
    base = dict(scenario="s", pair="reference+x", sidecar="reference", worker="x", duration_s=0.1,
                requirements=("A-001", "B-001"))
    return ScenarioFinished(**{**base, **kw})


def test_matrix_rows_use_each_requirements_own_verdict() -> None:
    r = _result(outcome=Outcome.FAILED, verdicts=(("A-001", "FAILED"), ("B-001", "PASSED")), broken=("A-001",))
    cells = RunView.from_events([r]).cells()
    assert cells[("A-001", "reference+x")].status is CellStatus.FAILED
    assert cells[("B-001", "reference+x")].status is CellStatus.PASSED


def test_results_round_trip_and_old_outcomes_are_read() -> None:
    r = _result(outcome=Outcome.KNOWN_FAILURE, verdicts=(("A-001", "KNOWN_FAILURE"),), broken=("A-001",),
                observations=(("ScheduleTask.id", "ids differ"),))
    assert from_json(to_json(r)) == r
    old = to_json(_result(outcome=Outcome.PASSED)).replace('"PASSED"', '"NOT_IMPLEMENTED"')
    assert from_json(old).outcome is Outcome.KNOWN_FAILURE


def test_every_must_of_the_catalogue_cites_the_contract() -> None:
    """A MUST cites a section of the spec (seed 000/002/004) or the behaviour both real engines share."""
    uncited = [r.id for r in load_catalogue() if r.level == "MUST"
               and "seed 0" not in r.source and "both engines" not in r.source]
    assert not uncited, f"MUST requirements citing neither the spec nor both engines: {uncited}"
