"""The fuzzer finds every mutant (tests/mutants/variants.py) without being told where it is.

Engine mutants run under the engine state machine (conformance/fuzz/engine_machine.py), worker
mutants under the differential campaign (conformance/fuzz/worker_fuzz.py), both with short
budgets and derandomized, so the result is the same on every run. The reference engine and
worker are fuzzed with the same budget: the reference worker yields nothing, the reference
engine only the bugs listed in REFERENCE_ENGINE_BUGS (reported, not yet fixed), which the mutant
campaigns skip so that their budget goes to other kinds of findings.
"""

from __future__ import annotations


import pytest

from fake_sidecar.engine import EnginePolicy
from fake_sidecar.engine.policy import REFERENCE_POLICY

from conformance.fuzz.common import Budget
from conformance.fuzz.engine_machine import EngineCampaign
from conformance.fuzz.worker_fuzz import WorkerCampaign
from conformance.fuzz.workers import FunctionWorker, ReferenceWorker
from tests.mutants.variants import ENGINE_MUTANTS, WORKER_MUTATIONS

ENGINE_EXAMPLES = 500
# A kept timeout timer shows only in a run that raises the event before the timeout and then moves
# the clock past it: rarer than the other mutants' sequences (found at ~1000 examples, derandomized).
ENGINE_EXAMPLES_FOR = {"keeps-timeout-timers": 1500}
WORKER_EXAMPLES = 400

# Reference engine behaviours the model rejects (docs/fuzzing.md, "Findings"): each a check name of
# engine_machine.py. Remove an entry when the engine is fixed.
REFERENCE_ENGINE_BUGS: dict[str, str] = {}  # none known: both reported ones are fixed


# What each engine mutant is expected to break (the check that names it; "history R…" are the
# history rules of conformance/checks/history.py, the same ones every scenario's histories meet).
ENGINE_EXPECTED = {
    "ignores-tokens": {"tokens"},
    "applies-completion-twice": {"history R2.7", "tokens"},
    "never-redelivers": {"redelivery"},
    "skips-patch-check": {"stalls"},
    "drops-events-while-suspended": {"events-kept"},
    "forgets-timer": {"timers"},
    "unstamped-timers": {"history R2.6"},
    "backdated-results": {"history R2.6"},
    "timer-fired-at-creation": {"history R2.6", "timers"},
    "repeats-turn-time": {"history R2.6"},
    "result-after-actions": {"history R2.1"},
    "keeps-timeout-timers": {"history R6.3"},
    "terminates-with-failure": {"history R6.8"},
    "records-continue-as-new": {"history R2.10"},
    "records-events-twice": {"history R6.5"},
}
# Engine mutants whose break the state machine cannot produce (their scenarios catch them, tests/mutants).
OUT_OF_REACH = {
    "unrouted-results": "the machine's engine hosts no apps, so no history it makes carries routers (R2.13)",
    "keeps-old-timers": "no program leaves a timer pending at continue-as-new (R6.4)",
    # Needs a committed suspension, a raise, a resume and then both turns taken in that order: not found in
    # 500 derandomized examples (December 2026); arrival/event-in-any-before catches it.
    "holds-events-while-suspended": "the suspend-raise-resume sequence is too rare for the budget (R6.7)",
}


pytestmark = pytest.mark.usefixtures("quiet_logs")


def engine_campaign(policy: EnginePolicy, name: str, *, skip: set[str], stop_on: set[str] = frozenset(),
                    shrink: bool = False) -> EngineCampaign:
    examples = ENGINE_EXAMPLES_FOR.get(name, ENGINE_EXAMPLES)
    return EngineCampaign(policy=policy, name=name, budget=Budget(examples=examples),
                          derandomize=True, database=None, known={f"engine: {c}" for c in skip},
                          stop_on=set(stop_on), shrink=shrink)


def test_every_mutant_is_covered():
    assert set(ENGINE_EXPECTED) | set(OUT_OF_REACH) == set(ENGINE_MUTANTS)
    assert not set(ENGINE_EXPECTED) & set(OUT_OF_REACH)
    assert set(WORKER_MUTATIONS) == {"reorders-actions", "reuses-task-execution-ids", "retry-reuses-action-id",
                                     "custom-status-encoded-twice"} | set(WORKER_OUT_OF_REACH)


# Worker mutants the differential campaign does not reach, each with why (caught by their flow scenarios,
# tests/mutants/test_mutants.py).
WORKER_OUT_OF_REACH = {
    "never-retries": "needs an activity failure answered while its retry policy has attempts left; the campaign's "
                     "histories rarely fail a retried call in its first examples (not found in the budget)",
}


@pytest.mark.parametrize("mutant", sorted(ENGINE_EXPECTED))
def test_engine_mutant_is_found(mutant: str):
    findings = engine_campaign(ENGINE_MUTANTS[mutant], mutant, skip=set(REFERENCE_ENGINE_BUGS),
                               stop_on=ENGINE_EXPECTED[mutant]).run()
    checks = {f.check for f in findings}
    assert checks & ENGINE_EXPECTED[mutant], (
        f"the engine state machine did not find mutant {mutant} in "
        f"{ENGINE_EXAMPLES_FOR.get(mutant, ENGINE_EXAMPLES)} examples; found: "
        + "; ".join(f.headline() for f in findings))
    assert not checks & set(REFERENCE_ENGINE_BUGS)


def test_engine_findings_are_shrunk():
    """With shrinking on, a redelivery bug comes down to the few steps that show it."""
    findings = engine_campaign(ENGINE_MUTANTS["never-redelivers"], "never-redelivers",
                               skip=set(REFERENCE_ENGINE_BUGS), stop_on={"redelivery"}, shrink=True).run()
    f = next(f for f in findings if f.check == "redelivery")
    calls = [s for s in f.steps if not s.startswith("take(")]
    assert len(calls) <= 8, f.render()


def test_reference_engine_has_only_the_known_bugs():
    findings = engine_campaign(REFERENCE_POLICY, "reference", skip=set()).run()
    unexpected = [f for f in findings if f.check not in REFERENCE_ENGINE_BUGS]
    assert not unexpected, "the engine state machine fails the reference engine:\n\n" + \
        "\n\n".join(f.render() for f in unexpected)


@pytest.mark.parametrize("mutant", sorted(set(WORKER_MUTATIONS) - set(WORKER_OUT_OF_REACH)))
def test_worker_mutant_is_found(mutant: str):
    mutation = WORKER_MUTATIONS[mutant]
    campaign = WorkerCampaign(target=f"mutant:{mutant}", budget=Budget(examples=WORKER_EXAMPLES), derandomize=True,
                              make_worker=lambda bundle, doc: FunctionWorker(bundle, mutation, name=mutant),
                              fresh_process=False, database=None)
    findings = campaign.run()
    assert findings, f"the differential campaign did not find worker mutant {mutant} in {WORKER_EXAMPLES} examples"
    assert all(f.kind == "differential" for f in findings), [f.headline() for f in findings]
    # Shrunk: the finding is one turn with few events.
    smallest = min(findings, key=lambda f: len(f.case.past) + len(f.case.new))
    assert len(smallest.case.past) + len(smallest.case.new) <= 12, smallest.example


def test_reference_worker_agrees_with_itself():
    campaign = WorkerCampaign(target="reference", budget=Budget(examples=WORKER_EXAMPLES), derandomize=True,
                              make_worker=lambda bundle, doc: ReferenceWorker(bundle), fresh_process=True,
                              database=None)
    findings = campaign.run()
    assert not findings, "\n".join(f.headline() + "\n" + f.example for f in findings)
