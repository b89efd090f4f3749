"""What the compiled-driver tests (Go, Java) share: a scenario written from text and run on the
reference engine with one worker, a program bundle in the canonical form the harness hands a driver,
and the scenarios both drivers must pass."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import taskhub_programs as P
from conformance.events import Outcome
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_scenario
from conformance.targets.registry import load_targets


def run_on_reference(scenario_path: Path, root: Path, tmp_path: Path, *, worker: str):
    """One scenario of `root` on the reference engine with `worker`."""
    scenario = load_scenario(scenario_path, root=root)
    pair = load_targets().pair("reference", worker)
    return run_scenario(scenario, pair, work_root=tmp_path,
                        reproduce=f"conformance run --worker {worker} --scenario {scenario.id}")


def assert_passed(result) -> None:
    assert result.outcome == Outcome.PASSED, f"{result.scenario}: {result.outcome.value}\n{result.message}"


def write_scenario(tmp_path: Path, *, folder: str, name: str, text: str) -> tuple[Path, Path]:
    """The scenario text (indented as in a test module) as a file of a scenario root under tmp_path."""
    root = tmp_path / "scenarios"
    path = root / folder / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path, root


def canonical_bundle(tmp_path: Path, programs: dict) -> Path:
    """The programs as the harness hands them to a driver: the canonical form ({canonical})."""
    path = tmp_path / "programs.canonical.json"
    path.write_text(json.dumps(P.canonical_form(programs)), encoding="utf-8")
    return path


RETRY_TIMEOUT = """\
    title: A retry timeout the SDK measures on the workflow's clock stops the retries
    requirements: [ACT-RETRY-001]
    requires: [retries, retry_timeout]
    # The second failure comes after a 100 ms retry timer, so at least 100 ms after the first attempt:
    # past the timeout on the SDK's rule, whatever the machine's load. Without the timeout the third
    # attempt would succeed (COMPLETED).
    programs:
      main:
        steps:
          - call_activity: {name: fail, input: {times: 2}, retry: {max_attempts: 4, first_delay: 100ms, timeout: 100ms}}
          - return: unreachable
    start: {workflow: main}
    expect:
      status: FAILED
      history:
        count: {TaskCompleted: 0}
    timeout: 20s
"""
