"""The engine setting `late_timeout_timers` (R6.3 as durabletask-go's sidecar applies it): read from a
scenario or from `--engine-setting`, handed to the reference engine, which then delivers a won
wait's TimerFired late, so flow scenarios reach what the standalone sidecar delivers."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conformance.errors import InputError
from conformance.events import Outcome
from conformance.run_options import RunOptions, UsageError, build_pairs
from conformance.runner.execute import run_scenario
from conformance.scenario.engine import EngineSetting, EngineSettings, parse_cli_settings
from conformance.scenario.loader import load_scenario
from conformance.targets.base import Pair
from conformance.targets.registry import load_targets
from taskhub_programs.language import parse_duration

ROOT = Path(__file__).resolve().parents[2]

# The event wins at once; the wait's 1 s timeout timer can only show up in history if the engine
# keeps it, and it must then come after the event and change nothing.
LATE = """title: t
requirements: [RPL-EXEC-001]
programs:
  main:
    steps:
      - wait_event: {name: go, timeout: 1s, default: timed out}
        as: a
      - timer: 2s
      - return: "${a}"
start: {workflow: main}
steps:
  - raise: {event: go, data: won}
expect:
  status: COMPLETED
  output: won
  history:
    contains_in_order: [{TimerCreated: {eventId: "${w}"}}, EventRaised, {TimerFired: {timerId: "${w}"}}]
    count: {TimerCreated: 2, TimerFired: 2}
timeout: 10s   # how long the default engine's run waits in vain for the late TimerFired
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    return load_scenario(path, root=tmp_path)


def reference_pair(*, engine: EngineSettings = EngineSettings()) -> Pair:
    targets = load_targets()
    return Pair(sidecar=replace(targets.sidecars["reference"], engine=engine), worker=targets.workers["reference"])


def test_the_setting_is_a_boolean_and_only_true_needs_the_capability(tmp_path):
    late = load(tmp_path, LATE + "engine: {late_timeout_timers: true}\n").engine
    assert late == EngineSettings(late_timeout_timers=True)
    assert late.capabilities() == {"engine_late_timeout_timers"}
    cancelling = EngineSettings(late_timeout_timers=False)
    assert cancelling.asked() == (EngineSetting.LATE_TIMEOUT_TIMERS,) and cancelling.needed() == ()
    with pytest.raises(InputError) as bad:
        load(tmp_path, LATE + "engine: {late_timeout_timers: sometimes}\n")
    assert "late_timeout_timers is true or false, got 'sometimes'" in str(bad.value)


def test_a_scenario_setting_wins_over_the_runs():
    run = EngineSettings(late_timeout_timers=True, max_concurrent_activities=2)
    assert EngineSettings(late_timeout_timers=False).over(run) == EngineSettings(late_timeout_timers=False,
                                                                                 max_concurrent_activities=2)
    assert EngineSettings().over(run) == run


def test_cli_settings_are_read_as_yaml_and_bad_ones_named():
    assert parse_cli_settings(["late_timeout_timers=true", "retention={completed: 2s}"],
                              duration=parse_duration).late_timeout_timers is True
    with pytest.raises(ValueError) as bad:
        parse_cli_settings(["late_timeout_timers", "speed=fast", "late_timeout_timers=maybe"], duration=parse_duration)
    text = str(bad.value)
    assert "--engine-setting 'late_timeout_timers': write NAME=VALUE" in text
    assert "unknown engine setting 'speed'" in text
    assert "late_timeout_timers is true or false, got 'maybe'" in text


def test_a_sidecar_that_cannot_deliver_late_timers_is_refused_before_the_run():
    with pytest.raises(UsageError) as bad:
        build_pairs(RunOptions(sidecar=("daprd",), engine_setting=("late_timeout_timers=true",)))
    assert "sidecar daprd cannot be started with engine setting late_timeout_timers" in str(bad.value)
    pairs = build_pairs(RunOptions(engine_setting=("late_timeout_timers=true",)))
    assert [p.sidecar.engine.late_timeout_timers for p in pairs] == [True]


def test_the_reference_engine_takes_the_setting(tmp_path):
    target = load_targets().sidecar("reference")
    for asked, kept in ((EngineSettings(late_timeout_timers=True), True), (EngineSettings(), False)):
        sidecar = target.starter(options={"engine": asked}, work_dir=tmp_path)
        try:
            assert sidecar.engine.config.late_timeout_timers is kept
        finally:
            sidecar.stop()


def test_the_run_setting_makes_the_reference_deliver_the_late_timer_and_the_worker_ignore_it(tmp_path):
    sc = load(tmp_path, LATE)
    late = run_scenario(sc, reference_pair(engine=EngineSettings(late_timeout_timers=True)), work_root=tmp_path)
    assert late.outcome is Outcome.PASSED, late.failures
    # The default engine deletes the timer when the event commits (daprd v1.18.1+): no late TimerFired.
    default = run_scenario(sc, reference_pair(), work_root=tmp_path)
    assert default.outcome is Outcome.FAILED
    assert any("TimerFired" in f.text for f in default.failures), default.failures


def test_a_late_timer_breaks_r6_3_only_when_the_engine_was_not_asked_for_it():
    from conformance.checks.history import breaks

    history = [
        {"kind": "WorkflowStarted", "timestamp": "2026-01-01T00:00:00Z"},
        {"kind": "ExecutionStarted", "name": "main"},
        {"kind": "TimerCreated", "eventId": 1, "fireAt": "2026-01-01T00:00:10Z", "externalEvent": {"name": "go"},
         "timestamp": "2026-01-01T00:00:00Z"},
        {"kind": "WorkflowStarted", "timestamp": "2026-01-01T00:00:01Z"},
        {"kind": "EventRaised", "name": "go", "timestamp": "2026-01-01T00:00:01Z"},
        {"kind": "TimerCreated", "eventId": 2, "fireAt": "2026-01-01T00:00:30Z", "createTimer": {},
         "timestamp": "2026-01-01T00:00:01Z"},
        {"kind": "WorkflowStarted", "timestamp": "2026-01-01T00:00:10Z"},
        {"kind": "TimerFired", "timerId": 1, "fireAt": "2026-01-01T00:00:10Z", "timestamp": "2026-01-01T00:00:10Z"},
    ]
    assert [(b.rule, b.index) for b in breaks(history) if b.rule == "R6.3"] == [("R6.3", 7)]
    assert [b.rule for b in breaks(history, late_timeouts=True) if b.rule == "R6.3"] == []


def test_the_cli_flag_reaches_the_run_and_a_bad_one_is_exit_2(tmp_path):
    folder = tmp_path / "lib" / "x"
    folder.mkdir(parents=True)
    (folder / "late.yaml").write_text(LATE, encoding="utf-8")

    def conformance(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "conformance", "run", "--scenarios", str(tmp_path / "lib"),
                               "--no-reports", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)

    ok = conformance("--engine-setting", "late_timeout_timers=true")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = conformance("--engine-setting", "late_timeout_timers=often")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "late_timeout_timers is true or false, got 'often'" in bad.stderr
