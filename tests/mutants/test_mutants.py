"""Test the tester: every mutant is caught by the scenarios that target it, and passes the others it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.events import Outcome
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_scenario
from tests.mutants.variants import ENGINE_MUTANTS, WORKER_MUTATIONS, mutant_pair

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

# mutant -> scenarios that must turn red (each at least one FAILED), and one that must stay green
TARGETED = {
    "ignores-tokens": ["tokens/zombie-stale-completion"],
    "applies-completion-twice": ["tokens/duplicate-completion-applied-once"],
    "never-redelivers": ["activities/redelivered-after-disconnect", "activities/crash-after-run-at-least-once"],
    "skips-patch-check": ["patching/mismatch-stalls-and-recovers"],
    "drops-events-while-suspended": ["lifecycle/events-while-suspended-are-kept"],
    "forgets-timer": ["timers/timer-fires"],
    "reorders-actions": ["vectors/fan-out-order"],
    "reuses-task-execution-ids": ["vectors/task-execution-ids-differ"],
}
CONTROL = "activities/chain"


def test_every_mutant_has_targets():
    assert set(TARGETED) == set(ENGINE_MUTANTS) | set(WORKER_MUTATIONS)
    assert len(TARGETED) >= 8


@pytest.mark.parametrize("mutant", sorted(TARGETED))
def test_mutant_is_caught(mutant: str, tmp_path: Path):
    pair = mutant_pair(mutant)
    for scenario_id in TARGETED[mutant]:
        scenario = load_scenario(SCENARIOS / f"{scenario_id}.yaml", root=SCENARIOS)
        scenario = type(scenario)(**{**scenario.__dict__, "timeout": min(scenario.timeout, 6.0)})
        result = run_scenario(scenario, pair, work_root=tmp_path, reproduce=f"mutant {mutant}")
        assert result.outcome is Outcome.FAILED, (
            f"mutant {mutant} was not caught by {scenario_id}: {result.outcome.value}\n{result.message}")


@pytest.mark.parametrize("mutant", sorted(ENGINE_MUTANTS))
def test_engine_mutants_still_run_a_plain_chain(mutant: str, tmp_path: Path):
    """A mutant differs in one behaviour only: the plain chain still passes, so failures above are specific."""
    scenario = load_scenario(SCENARIOS / f"{CONTROL}.yaml", root=SCENARIOS)
    result = run_scenario(scenario, mutant_pair(mutant), work_root=tmp_path, reproduce="control")
    assert result.outcome is Outcome.PASSED, result.message
