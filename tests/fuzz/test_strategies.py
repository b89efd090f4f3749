"""The fuzzer's own pieces: programs load, schedules give well-formed histories, mutations and dialects
keep turns sendable, findings become scenarios that pass on the reference pair."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskhub_programs import parse_bundle
from fake_worker.replay import execute
from taskhub_wire import pb

from conformance.checks.history import invariants
from conformance.fuzz import programs as P
from conformance.fuzz.common import Budget
from conformance.dialects.compare import compare, profile_for, signature
from conformance.dialects.history import Dialect, _renumber_action
from conformance.dialects.turn import TurnCase
from conformance.fuzz.interleave import DataChooser, RandomChooser, run_program
from conformance.fuzz.mutate import REACHABLE_TWICE, mutate
from conformance.fuzz.scenario_out import event_data, round_trips
from conformance.scenario.wire import event_dict, parse_event

CI = settings(max_examples=60)  # the rest is the project's profile (tests/conftest.py)
POOL = P.sample_pool(7, 16)
BUNDLE = parse_bundle({"programs": POOL})
PROGRAMS = sorted(n for n in POOL if n.startswith("p"))


@CI
@given(P.program_docs())
def test_generated_programs_load(doc):
    parse_bundle({"programs": P.bundle_doc({"w": doc})})


def test_pool_is_deterministic_and_distinct():
    again = P.sample_pool(7, 16)
    assert again == POOL
    bodies = [json.dumps(POOL[n], sort_keys=True) for n in PROGRAMS]
    assert len(set(bodies)) == len(bodies) == 16
    assert P.sample_pool(8, 16) != POOL


def test_features_limit_programs():
    bare = P.Features.from_capabilities(["events"])
    pool = P.sample_pool(3, 20, bare)
    text = json.dumps(pool)
    for marker in ('"if_patched"', '"retry"', '"call_child"', '"versions"', '"timer"'):
        assert marker not in text


def _schedules(n: int):
    for i in range(n):
        rng = random.Random(i)
        name = PROGRAMS[i % len(PROGRAMS)]
        yield run_program(BUNDLE, name, rng.choice([0, 1, "a", None]), RandomChooser(rng), instance_id=f"fz-{i}")


# Known reference-engine behaviour (docs/fuzzing.md, findings): actions after a completion are recorded.
AFTER_COMPLETION = "events follow ExecutionCompleted"


def test_schedules_give_well_formed_histories():
    """Every committed history the schedules produce passes the harness's own history_well_formed check."""
    checked = 0
    for run in _schedules(300):
        for case in run.cases:
            if case.form != "dispatched":
                continue
            history = [event_dict(e) for e in case.past]
            problems = [p for p in invariants(history) if AFTER_COMPLETION not in p]
            assert not problems, f"{run.workflow}: {problems}"
            checked += 1
    assert checked > 300


def test_recorded_answers_replay_identically():
    """A turn of a schedule, replayed, gets the answer it got when it was made (the reference is deterministic)."""
    for run in _schedules(200):
        for case in run.cases:
            if case.answer is None:
                continue
            again = execute(BUNDLE, instance_id=case.instance_id, past=case.past, new=case.new)
            assert [a.SerializeToString(deterministic=True) for a in again.actions] == \
                [a.SerializeToString(deterministic=True) for a in case.answer.actions]


def test_schedules_cover_the_interleavings():
    kinds: set[str] = set()
    forms: set[str] = set()
    ends: set[str] = set()
    for run in _schedules(400):
        ends.add(run.end)
        for case in run.cases:
            forms.add(case.form)
            kinds |= {e.WhichOneof("eventType") for e in case.new}
    assert {"taskCompleted", "taskFailed", "timerFired", "eventRaised", "executionSuspended", "executionResumed",
            "executionTerminated", "childWorkflowInstanceCompleted", "childWorkflowInstanceFailed"} <= kinds
    assert {"dispatched", "redelivered"} <= forms
    assert {"completed", "failed", "terminated", "continued"} <= ends


@CI
@given(st.data())
def test_hypothesis_schedules_shrink_to_nothing_happening(data):
    run = run_program(BUNDLE, data.draw(st.sampled_from(PROGRAMS)), 0, DataChooser(data))
    assert run.cases and run.cases[0].new[1].HasField("executionStarted")


def test_mutations_keep_turns_sendable_and_writable():
    n = 0
    for run in _schedules(200):
        for case in run.cases:
            rng = random.Random(n)
            m = mutate(RandomChooser(rng), case, rounds=2)
            n += 1
            if m is None:
                continue
            assert m.new and m.form == "mutated" and m.note
            assert round_trips(m.past) and round_trips(m.new)
            execute(BUNDLE, instance_id=m.instance_id, past=m.past, new=m.new)  # never raises


def test_duplicate_never_copies_an_event_an_engine_records_twice():
    """A second ExecutionSuspended (or ExecutionResumed, EventRaised) is a reachable history (R6.5, R6.7):
    the durabletask-js campaign of seed 12 reported one as a robustness SHOULD of an "impossible" turn."""
    started = pb.HistoryEvent(eventId=-1)
    started.workflowStarted.SetInParent()
    base = [started]
    for kind in sorted(REACHABLE_TWICE):
        ev = pb.HistoryEvent(eventId=-1)
        getattr(ev, kind).SetInParent()
        base.append(ev)
    case = TurnCase("i", (), tuple(base), "dispatched")
    copied = set()
    for seed in range(200):
        rng = random.Random(seed)
        m = mutate(RandomChooser(rng), case, rounds=1)
        if m is None or not m.note.startswith("duplicate"):
            continue
        kinds = [e.WhichOneof("eventType") for e in m.new]
        copied |= {k for k in kinds if kinds.count(k) > 1}
    assert copied == {"workflowStarted"}


def test_event_wire_round_trip():
    for run in _schedules(50):
        for case in run.cases:
            for i, ev in enumerate(case.past + case.new):
                assert parse_event(event_data(ev), index=i) == ev


def test_dialect_without_sentinel_timers_matches_the_reference():
    """Sentinel timers stripped from a turn: the reference's ranked answer equals the original one's,
    stripped and ranked the same way (both only differ by the reserved ids)."""
    d = Dialect(id_base=1, optional_timers=False)
    changed = 0
    for run in _schedules(200):
        for case in run.cases:
            if case.answer is None:
                continue
            t = d.turn(case)
            if t is case:
                continue
            changed += 1
            ref = execute(BUNDLE, instance_id=t.instance_id, past=t.past, new=t.new).response(
                instance_id=t.instance_id, completion_token="")
            assert not any(e.HasField("timerCreated") and e.timerCreated.fireAt.seconds == 253402300799
                           for e in t.past + t.new)
            mine = d.reference(ref, t)
            theirs = d.from_worker(d.reference(case.answer.response(instance_id=case.instance_id,
                                                                    completion_token=""), t), t)
            assert compare(mine, theirs).equal, compare(mine, theirs).describe()
    assert changed > 20


def test_dialect_id_shift_round_trips():
    d = Dialect(id_base=0, optional_timers=True)
    for run in _schedules(100):
        for case in run.cases:
            sent = d.to_worker(case)
            assert all(e.eventId < 1 or e.eventId + 1 in {x.eventId for x in case.past + case.new}
                       for e in sent.past + sent.new)
            if case.answer is None:
                continue
            resp = case.answer.response(instance_id=case.instance_id, completion_token="")
            shifted = pb.WorkflowResponse()
            shifted.CopyFrom(resp)
            for a in shifted.actions:  # what a 0-based SDK answers (child ids named after its ids)
                _renumber_action(a, lambda i: i - 1, case.instance_id)
            assert compare(resp, d.from_worker(shifted, case)).equal


def test_signature_ignores_indices_and_payload_insides():
    a = signature([("actions[0].scheduleTask.input.json.k", 1, 2), ("actions[3].id", 1, 2)])
    b = signature([("actions[5].scheduleTask.input.json.other", 1, 2), ("actions[0].id", 4, 5)])
    assert a == b


def test_profiles_follow_capabilities():
    assert profile_for("dapr-ext-workflow", ["task_execution_id", "teid_uuid5", "timer_origins"]).notes == ()
    js = profile_for("durabletask-js", ["ids_from_one"])
    assert "taskExecutionId" in js.ignored and not js.timer_origins and js.empty_strings_unset
    go = profile_for("durabletask-go-worker", ["task_execution_id", "timer_origins"])
    assert "taskExecutionId" in go.ignored and go.timer_origins and not go.compare_error_types


@pytest.mark.parametrize(("text", "seconds", "examples"), [("10m", 600.0, None), ("90s", 90.0, None),
                                                          ("500", None, 500), ("1h", 3600.0, None)])
def test_budget(text, seconds, examples):
    b = Budget.parse(text)
    assert (b.seconds, b.examples) == (seconds, examples)


def test_bad_budget():
    with pytest.raises(ValueError, match="budget"):
        Budget.parse("soon")


def test_vector_for_a_finding_passes_on_the_reference_pair(tmp_path: Path):
    """A finding written as a scenario loads, and passes on the reference pair (checked on writing)."""
    from conformance.fuzz.scenario_out import check_reference, write
    from conformance.fuzz.worker_fuzz import Finding
    from conformance.dialects.compare import EXACT

    run = next(r for r in _schedules(50) if len(r.cases) >= 2)
    case = run.cases[1]
    ref = case.answer.response(instance_id=case.instance_id, completion_token="")
    other = pb.WorkflowResponse()
    other.CopyFrom(ref)
    other.customStatus.value = "different"
    cmp = compare(ref, other)
    f = Finding(target="some-sdk", kind="differential", signature=cmp.signature(), case=case, workflow=run.workflow,
                bundle_doc=POOL, ref=ref, got=other, comparison=cmp, seed=7, round=0, example="test")
    path, note = write(f, profile=EXACT, command="test", out_dir=tmp_path / "scenarios" / "regressions")
    assert path is not None, note
    text = path.read_text(encoding="utf-8")
    assert "# Reproduce with: conformance run --worker some-sdk --scenario regressions/" in text
    assert "# Seed: 7" in text and "# fuzz-key: differential: customStatus" in text
    assert check_reference(path)[0]


def test_reduced_programs_answer_the_turn_the_same():
    from conformance.fuzz.scenario_out import _answer, reduce_program

    smaller = 0
    for run in _schedules(120):
        case = run.cases[-1]
        reduced = reduce_program(POOL, run.workflow, case)
        assert _answer(reduced, case) == _answer(POOL, case)
        before, after = json.dumps(POOL[run.workflow]), json.dumps(reduced[run.workflow])
        assert len(after) <= len(before)
        smaller += len(after) < len(before)
    assert smaller > 30
