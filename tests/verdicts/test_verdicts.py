"""Verdicts come from the contract: how mismatches become FAILED, WARNING or OBSERVATION."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cli import _fail_on, failing_outcomes
from conformance.events import Outcome, ScenarioFinished, from_json, to_json
from conformance.reporting.catalogue import load_catalogue
from conformance.reporting.model import RunView
from conformance.scenario.matching import Matcher
from conformance.attribution import judge
from conformance.verdict import (
    CROSS_WORKER, Diff, Level, Mismatch, MismatchKind, Subject, classify_answer_mismatch,
)

LEVELS = {"R-MUST": "MUST", "R-SHOULD": "SHOULD", "R-MAY": "MAY", "R-INFO": "INFO"}


def test_a_plain_mismatch_has_one_verdict_the_strongest_listed() -> None:
    # Never FAILED under one requirement and a WARNING or OBSERVATION under another: the others stay PASSED.
    j = judge([Mismatch(text="x")], requirements=["R-MUST", "R-SHOULD", "R-INFO"], levels=LEVELS)
    assert dict(j.per_requirement) == {"R-MUST": Outcome.FAILED, "R-SHOULD": Outcome.PASSED,
                                       "R-INFO": Outcome.PASSED}
    assert j.outcome is Outcome.FAILED and j.broken == ("R-MUST",)
    assert {v for _, _, v in j.marks} == {Outcome.FAILED}


def test_only_a_should_warns_and_only_an_info_observes() -> None:
    assert judge([Mismatch(text="x")], requirements=["R-SHOULD"], levels=LEVELS).outcome is Outcome.WARNING
    assert judge([Mismatch(text="x")], requirements=["R-MAY"], levels=LEVELS).outcome is Outcome.OBSERVATION


def test_an_observation_never_fails_a_must_scenario() -> None:
    j = judge([Mismatch(text="ids differ", level=Level.OBSERVATION)], requirements=["R-MUST"], levels=LEVELS)
    assert j.outcome is Outcome.OBSERVATION
    assert dict(j.per_requirement) == {"R-MUST": Outcome.PASSED, CROSS_WORKER: Outcome.OBSERVATION}
    assert j.broken == ()


def test_a_named_requirement_is_the_one_broken() -> None:
    j = judge([Mismatch(text="x", requirement="R-MUST")], requirements=["R-MUST", "R-SHOULD"], levels=LEVELS)
    assert dict(j.per_requirement) == {"R-MUST": Outcome.FAILED, "R-SHOULD": Outcome.PASSED}


def test_an_uncatalogued_requirement_is_not_excused() -> None:
    assert judge([Mismatch(text="x")], requirements=["NOPE-001"], levels=LEVELS).outcome is Outcome.FAILED


def test_no_mismatch_passes() -> None:
    j = judge([], requirements=["R-MUST"], levels=LEVELS)
    assert j.outcome is Outcome.PASSED and j.sections == ()


def test_requirements_with_the_same_mismatches_share_one_section() -> None:
    j = judge([Mismatch(text="a"), Mismatch(text="b")], requirements=["R-MUST", "R-MUST2", "R-MAY"],
              levels={**LEVELS, "R-MUST2": "MUST"})
    assert [(s.verdict, s.requirements, s.texts) for s in j.sections] == [
        (Outcome.FAILED, ("R-MUST", "R-MUST2"), ("a", "b"))]
    assert j.sections[0].heading == "FAILED: breaks R-MUST, R-MUST2 (MUST)"


def _diffs(expected: object, got: object) -> list[Diff]:
    out = Matcher().diffs(expected, got, "actions[0]")
    assert out, (expected, got)
    return out


@pytest.mark.parametrize(("expected", "got"), [
    ({"ScheduleTask": {"id": 1}}, {"ScheduleTask": {"id": 0}}),
    ({"ScheduleTask": {"taskExecutionId": "x"}}, {"ScheduleTask": {}}),
    ({"CreateChildWorkflow": {"instanceId": "p:0001"}}, {"CreateChildWorkflow": {"instanceId": "b3f0"}}),
    ({"CreateTimer": {"name": "!absent"}}, {"CreateTimer": {"name": "timer"}}),
    ({"CompleteWorkflow": {"failureDetails": {"errorType": "TaskFailedError"}}},
     {"CompleteWorkflow": {"failureDetails": {"errorType": "java.lang.X"}}}),
    ({"CreateTimer": {"origin": {"createTimer": {}}}}, {"CreateTimer": {}}),
    ({"CompleteWorkflow": {"customStatus": "!absent"}}, {"CompleteWorkflow": {"customStatus": ""}}),
    ({"CompleteWorkflow": {"customStatus": ""}}, {"CompleteWorkflow": {}}),
    ({"CompleteWorkflow": {"customStatus": ""}}, {"CompleteWorkflow": {"customStatus": None}}),
    ({"CreateTimer": {"fireAt": "2026-01-01T00:00:01.000500Z"}}, {"CreateTimer": {"fireAt": "2026-01-01T00:00:01Z"}}),
    ({"CreateTimer": {"fireAt": "2026-01-01T00:00:00.002001Z"}}, {"CreateTimer": {"fireAt": "2026-01-01T00:00:00.002Z"}}),
    ({"CreateChildWorkflow": {"retryParentInstanceInfo": "!absent"}},
     {"CreateChildWorkflow": {"retryParentInstanceInfo": {"instanceID": "p:0001"}}}),
])
def test_the_workers_own_choices_are_observations(expected: object, got: object) -> None:
    for diff in _diffs(expected, got):
        found = classify_answer_mismatch(diff)
        assert found.level is Level.OBSERVATION, diff
        assert (found.path, found.kind, found.text) == (diff.path, diff.kind, diff.text)


@pytest.mark.parametrize(("expected", "got"), [
    ({"ScheduleTask": {"name": "echo"}}, {"ScheduleTask": {"name": "Echo"}}),
    ({"ScheduleTask": {"input": 0}}, {"ScheduleTask": {"input": None}}),
    ({"CompleteWorkflow": {"workflowStatus": "ORCHESTRATION_STATUS_COMPLETED"}},
     {"CompleteWorkflow": {"workflowStatus": "ORCHESTRATION_STATUS_FAILED"}}),
    ({"CompleteWorkflow": {"carryoverEvents": [{"eventRaised": {"name": "B"}}]}},
     {"CompleteWorkflow": {"carryoverEvents": [{"eventRaised": {"name": "b"}}]}}),
    ({"CreateTimer": {"fireAt": "2026-01-01T00:00:05Z"}}, {"CreateTimer": {"fireAt": "2026-01-01T00:00:01Z"}}),
    ({"CompleteWorkflow": {"carryoverEvents": [{}, {}]}}, {"CompleteWorkflow": {"carryoverEvents": [{}]}}),
])
def test_the_programs_semantics_keep_the_scenarios_level(expected: object, got: object) -> None:
    for diff in _diffs(expected, got):
        assert classify_answer_mismatch(diff).level is None, diff


def test_a_difference_is_data_and_its_text_is_the_matchers_line() -> None:
    (diff,) = _diffs({"ScheduleTask": {"name": "echo", "input": "!absent"}}, {"ScheduleTask": {"name": "echo",
                                                                                                  "input": 3}})
    assert (diff.path, diff.kind, diff.expected, diff.got) == ("actions[0].ScheduleTask.input", MismatchKind.UNEXPECTED,
                                                               None, 3)
    assert diff.text == "actions[0].ScheduleTask.input: expected absent, got 3"
    assert Matcher().match({"a": [1, 2]}, {"a": [1]}) == ["$.a: expected 2 items, got 1: [1]"]


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
    assert cells[("A-001", "reference+x")].status is Outcome.FAILED
    assert cells[("B-001", "reference+x")].status is Outcome.PASSED


def test_results_round_trip_with_one_outcome_enum() -> None:
    r = _result(outcome=Outcome.KNOWN_FAILURE, verdicts=(("A-001", Outcome.KNOWN_FAILURE),), broken=("A-001",),
                observations=(("ScheduleTask.id", "ids differ"),))
    back = from_json(to_json(r))
    assert back == r and back.verdicts[0][1] is Outcome.KNOWN_FAILURE
    with pytest.raises(ValueError, match="NOT_IMPLEMENTED"):  # an outcome no release of ours writes any more
        from_json(to_json(_result(outcome=Outcome.PASSED)).replace('"PASSED"', '"NOT_IMPLEMENTED"'))


def _rule_sections() -> dict[str, str]:
    """docs/engine-rules.md's rules by number ("R11.1") with their text."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "engine-rules.md").read_text(encoding="utf-8")
    parts = re.split(r"^### (R\d+\.\d+)\b", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_every_must_of_the_catalogue_cites_the_contract() -> None:
    """A MUST cites a section of the spec (seed 000/002/004) or the behaviour both real engines (or every SDK)
    share; where the spec is silent, daprd's behaviour is the contract: an engine rule that shows daprd's code
    (a file:line) or is marked [BOTH], or dapr's own integration test the requirement ports."""
    import re

    rules = _rule_sections()

    def engine_backed(req) -> bool:
        cited = re.findall(r"R\d+\.\d+", req.source) if "engine-rules" in req.source else []
        shown = all(re.search(r"\.go:\d+|^[^\n]*\[BOTH", rules.get(r, "")) for r in cited)
        ported = any("tests/integration/" in p for p in req.ports)
        return bool(cited) and (shown or ported)

    uncited = [r.id for r in load_catalogue() if r.level == "MUST"
               and "seed 0" not in r.source and "both engines" not in r.source and "every SDK" not in r.source
               and not engine_backed(r)]
    assert not uncited, (f"MUST requirements citing neither the spec, both engines, every SDK, nor an engine rule "
                         f"with daprd's source lines or integration test: {uncited}")


# ------------------------------------------------------------------ end to end, on the reference pair

VECTOR = """
title: a first turn
kind: vector
requirements: [RPL-EXEC-001]
applies_to: [worker, pair]
programs:
  main:
    steps:
      - call_activity: {name: echo, input: 1}
        as: r
      - return: "${r}"
vector:
  instance_id: vec-verdicts
  past: []
  new:
    - {WorkflowStarted: {}, timestamp: "2026-01-01T00:00:00Z"}
    - {ExecutionStarted: {name: main, workflowInstance: {instanceId: vec-verdicts, executionId: e1}}}
NEW_EVENTS
  actions:
    - {ScheduleTask: {id: ID, name: NAME, input: 1}}
"""


def _run_vector(tmp_path, *, id: int = 1, name: str = "echo", new_events: str = "") -> ScenarioFinished:
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    folder = tmp_path / "scenarios" / "vectors"
    folder.mkdir(parents=True)
    path = folder / "v.yaml"
    path.write_text(VECTOR.replace("ID", str(id)).replace("NAME", name).replace("NEW_EVENTS\n", new_events),
                    encoding="utf-8")
    scenario = load_scenario(path, root=tmp_path / "scenarios")
    return run_scenario(scenario, load_targets().pair("reference", "reference"), work_root=tmp_path, reproduce="r")


def test_a_vector_that_matches_passes(tmp_path) -> None:
    assert _run_vector(tmp_path).outcome is Outcome.PASSED


def test_another_action_id_is_an_observation_not_a_failure(tmp_path) -> None:
    r = _run_vector(tmp_path, id=7)
    assert r.outcome is Outcome.OBSERVATION, r.message
    assert dict(r.verdicts)["RPL-EXEC-001"] == "PASSED" and r.broken == ()
    assert [f for f, _ in r.observations] == ["ScheduleTask.id"]


def test_another_activity_name_breaks_the_must(tmp_path) -> None:
    r = _run_vector(tmp_path, name="other")
    assert r.outcome is Outcome.FAILED and r.broken == ("RPL-EXEC-001",)
    assert r.message.startswith("FAILED: breaks RPL-EXEC-001 (MUST)\n  RPL-EXEC-001 (MUST): ")
    assert "\n    Cited as: seed 000" in r.message and "\n      docs/spec.md#" in r.message
    assert r.message.rstrip().endswith("Reproduce with: r")


def test_a_terminated_turn_applies_no_answer(tmp_path) -> None:
    terminate = '    - {ExecutionTerminated: {input: \'"stop"\'}}\n'
    r = _run_vector(tmp_path, name="other", new_events=terminate)
    assert r.outcome is Outcome.OBSERVATION, r.message
    assert "R3.16" in r.message


def _vector_check(tmp_path, *, actions: list, held: bool) -> list[Mismatch]:
    from conformance.checks import VectorObservation, run_check
    from conformance.failures import TargetMisbehaved
    from conformance.scenario.loader import load_scenario

    folder = tmp_path / "scenarios" / "vectors"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "v.yaml"
    path.write_text(VECTOR.replace("ID", "1").replace("NAME", "echo").replace(
        "NEW_EVENTS\n", "    - {ExecutionSuspended: {}}\n"), encoding="utf-8")
    scenario = load_scenario(path, root=tmp_path / "scenarios")
    obs = VectorObservation(scenario=scenario, answer={"actions": actions}, held=held)
    try:
        run_check("vector", obs)
    except TargetMisbehaved as exc:
        return exc.found
    return []


def test_a_turn_left_suspended_may_hold_its_actions(tmp_path) -> None:
    found = _vector_check(tmp_path, actions=[], held=True)
    assert [m.level for m in found] == [Level.OBSERVATION] and "EVT-SUSP-001" in found[0].text
    # Not held: the same empty answer misses the program's action.
    assert any(m.level is None for m in _vector_check(tmp_path, actions=[], held=False))
    # Held, but answered with the wrong action: still the program's semantics.
    wrong = [{"ScheduleTask": {"id": 1, "name": "other", "input": 1}}]
    assert any(m.level is None for m in _vector_check(tmp_path, actions=wrong, held=True))


def test_an_action_at_an_id_the_history_holds_for_another_is_a_stale_answer() -> None:
    from conformance.checks.replay import stale_actions

    recorded = {1: ("ScheduleTask", "echo")}
    stale = stale_actions([{"CreateTimer": {"id": 1, "fireAt": "9999-12-31T23:59:59.999999999Z"}}], recorded)
    assert [(m.requirement, m.level, m.subject) for m in stale] == [("RPL-EXEC-001", None, Subject.ACTIONS)]
    assert "answered at id 1, which the history already holds for ScheduleTask 'echo'" in stale[0].text
    # Another name at the id is stale too; the same action re-sent at its id, or a new id, is not.
    assert len(stale_actions([{"ScheduleTask": {"id": 1, "name": "other"}}], recorded)) == 1
    assert stale_actions([{"ScheduleTask": {"id": 1, "name": "echo"}}, {"CreateTimer": {"id": 2}}], recorded) == []


def test_a_vector_answered_at_a_recorded_id_breaks_rpl_exec_001(tmp_path) -> None:
    from conformance.checks import VectorObservation, run_check
    from conformance.failures import TargetMisbehaved
    from conformance.scenario.loader import load_scenario

    folder = tmp_path / "scenarios" / "vectors"
    folder.mkdir(parents=True)
    path = folder / "v.yaml"
    path.write_text(VECTOR.replace("ID", "1").replace("NAME", "echo").replace("NEW_EVENTS\n", ""), encoding="utf-8")
    scenario = load_scenario(path, root=tmp_path / "scenarios")
    obs = VectorObservation(scenario=scenario, answer={"actions": [{"ScheduleTask": {"id": 3, "name": "echo", "input": 1}}]},
                            recorded={3: ("CreateTimer", "")})
    with pytest.raises(TargetMisbehaved) as caught:
        run_check("vector", obs)
    assert [m.requirement for m in caught.value.found] == [None, "RPL-EXEC-001"]  # the id (an observation), then stale
    verdicts = judge(caught.value.found, requirements=["RPL-EXEC-001"], levels={"RPL-EXEC-001": "MUST"})
    assert verdicts.outcome is Outcome.FAILED


def test_an_expectation_key_may_name_a_value_a_step_captured() -> None:
    from conformance.checks import FlowObservation, resolve_instance

    obs = FlowObservation(scenario=None, instances={"main": "m-1"}, states={}, histories={},  # type: ignore[arg-type]
                          keys={"main": "m-1", "${child}": "m-1:0000"})
    assert resolve_instance(obs, "${child}") == "m-1:0000"  # captured by a call step (default-child-id-and-parent)
    assert resolve_instance(obs, "${main}-x") == "m-1-x"


def test_a_check_reads_one_sort_of_observation(tmp_path) -> None:
    from conformance.checks import REGISTRY, FlowObservation, VectorObservation, run_check

    assert REGISTRY["vector"].reads is VectorObservation and REGISTRY["expectations"].reads is FlowObservation
    flow = FlowObservation(scenario=None, instances={}, states={}, histories={})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="check 'vector' reads a VectorObservation, not a FlowObservation"):
        run_check("vector", flow)
