"""`call ... within`: a scenario waits for a state by asking again until the response matches."""

from __future__ import annotations

from pathlib import Path

from conformance.events import Outcome, ScenarioFinished

SCENARIO = """\
title: t
requirements: [CAN-NEWGEN-001]
programs:
  main:
    steps:
      - wait_event: tick
      - if:
          cond: {$lt: ["${input}", 1]}
          then: [{continue_as_new: {input: {$add: ["${input}", 1]}}}]
      - return: done
start: {workflow: main, input: 0}
steps:
  - raise: {event: tick}
  - call:
      rpc: GetInstance
      request: {instanceId: "${main}", getInputsAndOutputs: true}
      expect: {response: {workflowState: {input: "INPUT"}}}
WITHIN
  - raise: {event: tick}
expect: {status: COMPLETED, output: done}
timeout: 5s
"""


def _run(tmp_path: Path, *, input: str, within: str) -> ScenarioFinished:
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    folder = tmp_path / "scenarios" / "continue-as-new"
    folder.mkdir(parents=True)
    path = folder / "s.yaml"
    path.write_text(SCENARIO.replace("INPUT", input).replace("WITHIN\n", within), encoding="utf-8")
    scenario = load_scenario(path, root=tmp_path / "scenarios")
    return run_scenario(scenario, load_targets().pair("reference", "reference"), work_root=tmp_path, reproduce="r")


def test_the_call_is_repeated_until_the_new_generation_is_there(tmp_path: Path) -> None:
    result = _run(tmp_path, input="1", within="      within: 5s\n")
    assert result.outcome is Outcome.PASSED, result.message


def test_a_state_never_reached_fails_after_the_wait_with_the_last_mismatch(tmp_path: Path) -> None:
    result = _run(tmp_path, input="7", within="      within: 300ms\n")
    assert result.outcome is Outcome.FAILED, result.message
    assert "GetInstance response (still, after 0.3s)" in result.message and 'expected "7"' in result.message
