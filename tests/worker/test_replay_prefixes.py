"""Replay determinism of the pure executor over whole runs of the example bundle.

`simulate` (fake_worker/replay/simulate.py) runs each program to its end with only the executor,
committing every turn the way the engine does. Then, for every recorded turn:

- re-executing the turn (same past, same new events) gives the same answer;
- the final history, cut at that turn's boundaries, gives the same answer too (the committed
  WorkflowStarted carries the reported version and patches; the answer must not change);
- at every boundary where the workflow is still running, a turn of just [WorkflowStarted] after
  the history so far adds no action: everything the program asked for is already in history.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskhub_programs import load_bundle
from fake_worker.replay import execute
from fake_worker.replay.simulate import External, Turn, final_status, simulate
from taskhub_wire import pb
from tests.worker.histories import workflow_started

BUNDLE_PATH = Path(__file__).resolve().parents[2] / "taskhub_programs" / "examples" / "bundle.yaml"
BUNDLE = load_bundle(BUNDLE_PATH)

# Inputs and outside events for the programs that need them; every other program runs with input null
# and no events. Unknown names are skipped, so the example bundle may grow without breaking this test.
RUNS: dict[str, list[tuple[object, tuple]]] = {
    "chain": [("x", ())],
    "child": [("x", ())],
    "counter": [(0, ())],
    "failing": [("x", ())],
    "recorded": [({"n": 1}, ())],
    "event_wait": [(None, (("approve", "yes", 5),)), (None, ())],
    "event_timeout": [(None, ()), (None, (("approve", "early", 3),))],
    "race": [(None, ()), (None, (("go", 1, 2),))],
    "versioned": [(None, (("next", 1, 3),))],
}
CASES = [(name, inp, events) for name in sorted(BUNDLE.programs) for inp, events in RUNS.get(name, [(None, ())])]


def ids(case: tuple) -> str:
    name, inp, events = case
    return name + ("+events" if events else "")


def same(a: pb.WorkflowAction, b: pb.WorkflowAction) -> bool:
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def assert_same_answer(turn: Turn, past, new, iid: str) -> None:
    again = execute(BUNDLE, instance_id=iid, past=past, new=new)
    assert len(again.actions) == len(turn.actions) and all(map(same, again.actions, turn.actions)), (
        f"turn at {turn.time_ns}: {[a.WhichOneof('workflowActionType') for a in again.actions]} != "
        f"{[a.WhichOneof('workflowActionType') for a in turn.actions]}")
    assert (again.custom_status, again.version_name, again.patches) == (
        turn.result.custom_status, turn.result.version_name, turn.result.patches)


@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_every_turn_replays_to_the_same_answer(case: tuple) -> None:
    name, inp, events = case
    iid = f"{name}-1"
    turns = simulate(BUNDLE, name, inp, instance_id=iid, events=events)
    assert turns, "the simulation made no turn"
    for turn in turns:
        assert_same_answer(turn, turn.past, turn.new, iid)


@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_final_history_cut_at_turn_boundaries_gives_each_recorded_answer(case: tuple) -> None:
    name, inp, events = case
    iid = f"{name}-1"
    turns = simulate(BUNDLE, name, inp, instance_id=iid, events=events)
    for generation in sorted({t.generation for t in turns}):
        gen = [t for t in turns if t.generation == generation]
        history = list(gen[-1].history)
        for turn in gen:
            start = len(turn.past)
            assert history[:start] == list(turn.past), "history is not append-only"
            assert_same_answer(turn, history[:start], history[start:start + len(turn.new)], iid)


@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_an_empty_turn_after_any_boundary_adds_nothing_while_running(case: tuple) -> None:
    name, inp, events = case
    iid = f"{name}-1"
    turns = simulate(BUNDLE, name, inp, instance_id=iid, events=events)
    later = workflow_started(10**6)
    for turn in turns:
        if any(a.HasField("completeWorkflow") or a.HasField("workflowVersionNotAvailable") for a in turn.actions):
            continue  # the history now ends in ExecutionCompleted (or a stall): no more turns for it
        again = execute(BUNDLE, instance_id=iid, past=list(turn.history), new=[later])
        assert list(again.actions) == [], f"after the turn at {turn.time_ns}"
        assert again.custom_status == turn.result.custom_status


def test_the_runs_end_as_expected() -> None:
    """A guard on the simulator itself: the example programs finish with the results tests elsewhere expect."""
    expect = {
        ("chain", "x"): "x-b-c", ("child", "x"): "child:x-b-c", ("counter", 0): 3, ("fan_out_in", None): 15,
        ("timers", None): "slept", ("event_timeout", None): "timed-out", ("retry", None): "recovered",
        ("patched", None): "new", ("status", None): "done",
    }
    for (name, inp), output in expect.items():
        if name not in BUNDLE.programs:
            continue
        status, cw = final_status(simulate(BUNDLE, name, inp))
        assert status == pb.ORCHESTRATION_STATUS_COMPLETED, name
        assert cw.result.value == json.dumps(output), name
    status, _ = final_status(simulate(BUNDLE, "failing", "x"))
    assert status == pb.ORCHESTRATION_STATUS_FAILED


def test_waiting_forever_ends_the_simulation_with_the_workflow_running() -> None:
    turns = simulate(BUNDLE, "event_wait", None)
    assert final_status(turns) == (None, None)
    assert [a.WhichOneof("workflowActionType") for a in turns[-1].actions] == ["createTimer"]


def test_simulation_is_deterministic() -> None:
    def run() -> list[bytes]:
        out = []
        for t in simulate(BUNDLE, "child", "x", events=[External("raise", "noise", 1, at=0.5)]):
            out += [e.SerializeToString(deterministic=True) for e in t.history]
            out += [a.SerializeToString(deterministic=True) for a in t.actions]
        return out
    assert run() == run()


def test_suspend_resume_and_terminate_from_outside() -> None:
    held = simulate(BUNDLE, "timers", None, events=[External("suspend", at=0.5), External("resume", at=5)])
    assert final_status(held)[0] == pb.ORCHESTRATION_STATUS_COMPLETED
    assert held[-1].time_ns - held[0].time_ns >= 5 * 10**9
    stopped = simulate(BUNDLE, "event_wait", None, events=[External("terminate", value="bye", at=2)])
    status, cw = final_status(stopped)
    assert (status, cw.result.value) == (pb.ORCHESTRATION_STATUS_TERMINATED, '"bye"')
