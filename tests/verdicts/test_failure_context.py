"""A failure an SDK author can act on alone: a vector's program and turn in readable form, what was expected
and what came back, and the worker's own log lines."""

from __future__ import annotations

from pathlib import Path

from conformance.failure_context import failure_context, vector_context, worker_log
from conformance.scenario.loader import load_all

ROOT = Path(__file__).resolve().parents[2]


def test_a_vector_shows_its_program_history_and_both_answers():
    (scenario,) = load_all(ROOT / "scenarios", patterns=["vectors/any-first-result-wins"])
    got = {"actions": [], "custom_status": None}
    text = vector_context(scenario, answer=got)
    assert text.startswith("The turn (vectors/any-first-result-wins, ")
    assert "call_activity: {name: echo, input: fallback}" in text  # the program as written
    assert "#4   TaskScheduled 'echo' id 3 input=\"fallback\"" in text  # the history already played
    assert "new events of this turn:\n    #5   WorkflowStarted at 2026-01-01T00:00:05Z" in text
    assert "#7   EventRaised 'approve' input=\"late\"" in text
    assert "expected 1 action(s):\n    {\"CompleteWorkflow\": {\"id\": 4" in text
    assert text.rstrip().endswith("answered 0 action(s):\n    (none)")
    assert "answered: nothing" in vector_context(scenario, answer=None)


def test_the_worker_log_is_the_tail_of_its_own_output(tmp_path):
    (tmp_path / "vectors").mkdir()
    (tmp_path / "vectors" / "my-sdk-1.stderr.log").write_text("".join(f"line {i}\n" for i in range(40)))
    (tmp_path / "other-1.stderr.log").write_text("not the worker's\n")
    text = worker_log(tmp_path, "my-sdk")
    assert text.startswith("The worker's stderr (my-sdk, last 25 line(s)):\n  | line 15\n")
    assert "line 39" in text and "not the worker's" not in text
    (flow,) = load_all(ROOT / "scenarios", patterns=["timers/past-fire-at-fires-at-once"])
    assert failure_context(flow, worker="my-sdk", work_dir=tmp_path).startswith("\n\nThe worker's stderr")
