"""The `add_worker` step: one more worker on the same engine, which goes on when the first leaves."""

from __future__ import annotations

from pathlib import Path

from conformance.events import Outcome, ScenarioFinished

SCENARIO = """\
title: t
requirements: [CONN-MULTI-001]
programs:
  main:
    steps:
      - wait_event: go
      - call_activity: {name: echo, input: done}
        as: r
      - return: "${r}"
start: {workflow: main}
steps:
ADD
  - stop_worker: {}
  - raise: {event: go}
expect: {status: COMPLETED, output: done}
timeout: 3s
"""


def _run(tmp_path: Path, add: str) -> ScenarioFinished:
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    folder = tmp_path / "scenarios" / "connection"
    folder.mkdir(parents=True)
    path = folder / "s.yaml"
    path.write_text(SCENARIO.replace("ADD\n", add), encoding="utf-8")
    scenario = load_scenario(path, root=tmp_path / "scenarios")
    return run_scenario(scenario, load_targets().pair("reference", "reference"), work_root=tmp_path, reproduce="r")


def _streams(result: ScenarioFinished) -> int:
    return sum(1 for e in result.transcript if e.rpc == "GetWorkItems" and e.direction == "request")


def test_the_added_worker_finishes_what_the_first_left(tmp_path: Path) -> None:
    result = _run(tmp_path, "  - add_worker: {}\n")
    assert result.outcome is Outcome.PASSED, result.message
    assert _streams(result) == 2


def test_without_it_nothing_finishes_once_the_worker_stopped(tmp_path: Path) -> None:
    result = _run(tmp_path, "")
    assert result.outcome is Outcome.FAILED, result.message
    assert _streams(result) == 1
