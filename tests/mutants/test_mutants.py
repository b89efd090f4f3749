"""Test the tester: every mutant is caught by the scenarios that target it, and passes the others it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.events import Outcome
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_scenario
from conformance.targets.base import Pair
from conformance.targets.registry import load_targets
from tests.mutants.variants import ENGINE_MUTANTS, WORKER_MUTATIONS, mutant_pair

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
# Scenarios a mutant needs that the library has no reason to hold (one here, the same id there, is an error).
OWN = Path(__file__).resolve().parent / "scenarios"

# mutant -> scenarios that must turn red (each at least one FAILED), and one that must stay green
TARGETED = {
    "ignores-tokens": ["tokens/zombie-stale-completion"],
    "applies-completion-twice": ["tokens/duplicate-completion-applied-once"],
    "never-redelivers": ["activities/redelivered-after-disconnect", "activities/crash-after-run-at-least-once"],
    "skips-patch-check": ["patching/mismatch-stalls-and-recovers"],
    "drops-events-while-suspended": ["lifecycle/events-while-suspended-are-kept"],
    "forgets-timer": ["timers/timer-fires"],
    # The history rules (conformance/checks/history.py), caught by the check every flow scenario runs.
    "unstamped-timers": ["timers/timer-fires"],
    "backdated-results": ["activities/chain"],
    "timer-fired-at-creation": ["timers/timer-fires"],
    "repeats-turn-time": ["timers/timer-fires"],
    "result-after-actions": ["activities/chain"],
    "keeps-timeout-timers": ["timers/timeout-timer-cancelled-by-event"],
    "terminates-with-failure": ["lifecycle/terminate-running"],
    "records-continue-as-new": ["continue-as-new/carried-events-reach-new-generation"],
    "unrouted-results": ["crossapp/local-and-remote-calls-mixed"],
    "keeps-old-timers": ["continue-as-new/old-generation-timer-never-fires"],  # tests/mutants/scenarios
    "records-events-twice": ["events/unawaited-event-recorded"],
    "holds-events-while-suspended": ["arrival/event-in-any-before"],
    "reorders-actions": ["vectors/fan-out-order"],
    "reuses-task-execution-ids": ["vectors/task-execution-ids-differ"],
    # Charged to what they break (tests/verdicts/test_attribution.py reads the requirement and the text).
    "retry-reuses-action-id": ["history/duplicate-failure-recorded-once"],
    "custom-status-encoded-twice": ["vectors/completion-result"],
    "never-retries": ["history/duplicate-failure-recorded-once"],
}
CONTROL = "activities/chain"
# A mutant that the control itself exercises is checked against another plain scenario.
CONTROLS = {"backdated-results": "timers/timer-fires", "result-after-actions": "timers/timer-fires"}


def test_every_mutant_has_targets():
    assert set(TARGETED) == set(ENGINE_MUTANTS) | set(WORKER_MUTATIONS)
    assert len(TARGETED) >= 8


# The history rule each history mutant breaks: the history check must name it (not only an expectation).
RULE_OF = {"unstamped-timers": "R2.6", "backdated-results": "R2.6", "timer-fired-at-creation": "R2.6",
           "repeats-turn-time": "R2.6", "result-after-actions": "R2.1", "keeps-timeout-timers": "R6.3",
           "terminates-with-failure": "R6.8", "records-continue-as-new": "R2.10", "unrouted-results": "R2.13",
           "keeps-old-timers": "R6.4", "records-events-twice": "R6.5", "holds-events-while-suspended": "R6.7"}


def _scenario(scenario_id: str):
    own, library = OWN / f"{scenario_id}.yaml", SCENARIOS / f"{scenario_id}.yaml"
    assert own.is_file() != library.is_file(), f"{scenario_id}: in neither or both of {OWN} and {SCENARIOS}"
    return load_scenario(own, root=OWN) if own.is_file() else load_scenario(library, root=SCENARIOS)


# A mutant that breaks a SHOULD is caught as a WARNING: R6.3 is TMR-TIMEOUT-001 (SHOULD; durabletask-go's
# sidecar delivers the timer, engines_differ), and its scenario charges the history to it.
CAUGHT_AS = {"keeps-timeout-timers": Outcome.WARNING}


@pytest.mark.parametrize("mutant", sorted(TARGETED))
def test_mutant_is_caught(mutant: str, tmp_path: Path):
    pair = mutant_pair(mutant)
    for scenario_id in TARGETED[mutant]:
        scenario = _scenario(scenario_id)
        scenario = type(scenario)(**{**scenario.__dict__, "timeout": min(scenario.timeout, 6.0)})
        result = run_scenario(scenario, pair, work_root=tmp_path, reproduce=f"mutant {mutant}")
        if mutant in RULE_OF:
            assert f"({RULE_OF[mutant]})" in result.message, f"the history check missed {mutant}:\n{result.message}"
        assert result.outcome is CAUGHT_AS.get(mutant, Outcome.FAILED), (
            f"mutant {mutant} was not caught by {scenario_id}: {result.outcome.value}\n{result.message}")


@pytest.mark.parametrize("mutant", sorted(ENGINE_MUTANTS))
def test_engine_mutants_still_run_a_plain_chain(mutant: str, tmp_path: Path):
    """A mutant differs in one behaviour only: the plain chain still passes, so failures above are specific."""
    scenario = load_scenario(SCENARIOS / f"{CONTROLS.get(mutant, CONTROL)}.yaml", root=SCENARIOS)
    result = run_scenario(scenario, mutant_pair(mutant), work_root=tmp_path, reproduce="control")
    assert result.outcome is Outcome.PASSED, result.message


@pytest.mark.parametrize("scenario_id", sorted({s for ids in TARGETED.values() for s in ids
                                                if (OWN / f"{s}.yaml").is_file()}))
def test_own_targets_pass_on_the_reference(scenario_id: str, tmp_path: Path):
    """A scenario kept here for a mutant is one the reference pair passes: its failures are the mutant's."""
    targets = load_targets()
    pair = Pair(sidecar=targets.sidecar("reference"), worker=targets.worker("reference"))
    result = run_scenario(_scenario(scenario_id), pair, work_root=tmp_path, reproduce="reference")
    assert result.outcome is Outcome.PASSED, result.message
