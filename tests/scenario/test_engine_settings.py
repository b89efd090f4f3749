"""`engine:` settings of a scenario: read with errors at the YAML line, handed to each engine in its own
form (daprd's Configuration, the reference engine's options), NOT_APPLICABLE where a sidecar cannot."""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.errors import InputError
from conformance.events import Outcome
from conformance.runner.execute import run_scenario
from conformance.scenario.engine import EngineSetting, EngineSettings, Retention, daprd_workflow_spec
from conformance.scenario.loader import load_scenario
from conformance.targets.base import Pair, SidecarTarget
from conformance.targets.registry import load_targets

BASE = """title: t
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 1}
"""


def load(tmp_path: Path, engine: str):
    path = tmp_path / "s.yaml"
    path.write_text(BASE + engine, encoding="utf-8")
    return load_scenario(path, root=tmp_path)


def problems(tmp_path: Path, engine: str) -> list[tuple[int, str]]:
    try:
        load(tmp_path, engine)
    except InputError as exc:
        return [(p.line, p.what) for p in exc.problems]
    return []


def test_settings_are_read_into_typed_values(tmp_path):
    sc = load(tmp_path, "engine:\n  retention: {completed: 1s, any_terminal: 2h}\n  max_concurrent_activities: 2\n"
                        "  max_body_size: 10000000\n")
    assert sc.engine == EngineSettings(retention=Retention(completed=1.0, any_terminal=7200.0),
                                       max_concurrent_activities=2, max_body_size=10_000_000)
    assert sc.engine.asked() == (EngineSetting.RETENTION, EngineSetting.MAX_CONCURRENT_ACTIVITIES,
                                 EngineSetting.MAX_BODY_SIZE)
    assert load(tmp_path, "").engine.asked() == ()


def test_bad_settings_are_named_at_their_line(tmp_path):
    got = problems(tmp_path, "engine:\n  retention: {done: 1s}\n  max_concurrent_workflows: 0\n  speed: fast\n")
    lines = dict(got)
    assert "unknown retention status 'done'" in lines[7]
    assert "max_concurrent_workflows is a count of at least 1, got 0" in lines[8]
    assert "unknown engine setting 'speed'" in lines[9]
    assert problems(tmp_path, "engine: [retention]\n")[0][1].startswith("engine settings are a mapping of")


def test_daprd_gets_its_configuration_spec():
    spec = daprd_workflow_spec(EngineSettings(retention=Retention(any_terminal=1.0, terminated=0.0),
                                              max_concurrent_workflows=3))
    assert spec == {"maxConcurrentWorkflowInvocations": 3,
                    "stateRetentionPolicy": {"anyTerminal": "1000ms", "terminated": "0ms"}}
    assert daprd_workflow_spec(EngineSettings(max_body_size=5)) == {}  # a flag, not configuration


def test_the_reference_engine_takes_the_settings(tmp_path):
    target = load_targets().sidecar("reference")
    settings = EngineSettings(retention=Retention(completed=2.0), max_concurrent_activities=1, max_body_size=8_000_000,
                              stateful_history=False)
    sidecar = target.starter(options={"engine": settings}, work_dir=tmp_path)
    try:
        config = sidecar.engine.config
        assert config.retention_after("COMPLETED") == 2.0 and config.retention_after("FAILED") is None
        assert config.max_concurrent_activities == 1 and config.max_concurrent_workflows is None
        assert config.max_payload == 8_000_000 and config.max_message_bytes == 8_000_000
        assert config.stateful_history is False
    finally:
        sidecar.stop()


def test_a_sidecar_without_the_capability_makes_the_scenario_not_applicable(tmp_path):
    sc = load(tmp_path, "engine:\n  retention: {any_terminal: 1s}\n")
    targets = load_targets()
    bare = SidecarTarget(name="bare", kind="reference", capabilities=frozenset(), starter=None)
    result = run_scenario(sc, Pair(sidecar=bare, worker=targets.workers["reference"]), work_root=tmp_path)
    assert result.outcome is Outcome.NOT_APPLICABLE
    assert result.gap_reason == ("sidecar bare cannot be started with engine setting retention "
                                 "(capability engine_retention)")


def test_every_setting_capability_is_described_and_declared_by_the_reference():
    from conformance.targets.template import SIDECAR_CAPABILITIES

    targets = yaml.safe_load((Path(__file__).resolve().parents[2] / "conformance/targets/targets.yaml").read_text())
    for setting in EngineSetting:
        assert setting.capability in SIDECAR_CAPABILITIES
        assert setting.capability in targets["sidecars"]["reference"]["capabilities"]
