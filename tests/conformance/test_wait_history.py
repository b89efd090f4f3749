"""`wait_history`: a scenario waits for a committed state by reading the history, not by sleeping a margin."""

from __future__ import annotations

from pathlib import Path

from conformance.events import Outcome, ScenarioFinished

SCENARIO = """\
title: t
requirements: [EVT-BUFFER-001]
requires: [events]
programs:
  main:
    steps:
      - call_activity: {name: echo, input: a}
      - wait_event: go
        as: g
      - return: "${g}"
start: {workflow: main}
steps:
  - wait_history: WAITED
  - raise: {event: go, data: 1}
expect: {status: COMPLETED, output: 1}
timeout: 5s
"""


def _run(tmp_path: Path, *, waited: str) -> ScenarioFinished:
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    folder = tmp_path / "scenarios" / "events"
    folder.mkdir(parents=True)
    path = folder / "s.yaml"
    path.write_text(SCENARIO.replace("WAITED", waited), encoding="utf-8")
    scenario = load_scenario(path, root=tmp_path / "scenarios")
    return run_scenario(scenario, load_targets().pair("reference", "reference"), work_root=tmp_path, reproduce="r")


def test_the_wait_returns_once_the_history_shows_the_events(tmp_path: Path) -> None:
    waited = "[{TaskScheduled: {name: echo}}, TaskCompleted, {TimerCreated: {externalEvent: {name: go}}}]"
    result = _run(tmp_path, waited=waited)
    assert result.outcome is Outcome.PASSED, result.message


def test_events_that_never_come_fail_the_step_after_its_timeout_saying_which(tmp_path: Path) -> None:
    result = _run(tmp_path, waited="{contains_in_order: [TaskCompleted, TimerFired], timeout: 300ms}")
    assert result.outcome is not Outcome.PASSED, result.message
    assert "after 0.3s the history of" in result.message and "TimerFired" in result.message, result.message


def test_a_misspelt_event_kind_is_refused_with_did_you_mean(tmp_path: Path) -> None:
    from conformance.errors import InputError
    from conformance.scenario.loader import load_scenario

    folder = tmp_path / "scenarios" / "events"
    folder.mkdir(parents=True)
    path = folder / "s.yaml"
    path.write_text(SCENARIO.replace("WAITED", "[TaskCompleted, {TimerCreatd: {}}]"), encoding="utf-8")
    try:
        load_scenario(path, root=tmp_path / "scenarios")
    except InputError as exc:
        text = str(exc)
    else:
        raise AssertionError("a misspelt event kind was accepted")
    assert "'TimerCreatd' is not an event kind (did you mean 'TimerCreated'?)" in text, text
    assert "s.yaml:13:" in text, text
