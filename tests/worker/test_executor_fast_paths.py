"""The executor's shortcuts answer exactly what the plain code they replace answers (issue #3, replay speed).

(Expressions have one evaluator, `taskhub_programs.compile_expr`; tests/programs/ pin its values.)

- `from_json` is `json.loads`: same value, or the same error, for odd payloads too;
- a turn time beyond what a datetime holds fails the workflow at its WorkflowStarted, as converting it
  there did (the executor converts turn times only when something asks for them);
- a plain activity call left pending is built with the task execution id of its own turn.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from taskhub_programs import parse_bundle
from fake_worker.replay import execute
from fake_worker.replay.executor import from_json
from tests.worker.histories import (
    execution_id, failed, schedule, start, task_completed, task_scheduled, workflow_started,
)


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the comparison is of the errors
        return ("error", type(exc), str(exc))


@pytest.mark.parametrize("text", ["1", "-2.5e3", '"s"', "[1, 2]", '{"a": null}', "true", " 1", "1 ", "\n[1]\n",
                                  "\ufeff1", "1 2", "[1,", "", "nul", "NaN", "-Infinity", '"\\ud800"', "[" * 50000])
def test_from_json_is_json_loads(text):
    assert repr(_outcome(from_json, text)) == repr(_outcome(json.loads, text))


CHAIN = parse_bundle({"programs": {"chain": {"steps": [
    {"call_activity": {"name": "echo", "input": 0}, "as": "x"},
    {"call_activity": {"name": "echo", "input": {"$add": ["${x}", 1]}}},
]}}})


@pytest.mark.parametrize("seconds", [10**12, -10**12, 2**62])
def test_turn_time_beyond_datetime_fails_at_its_workflow_started(seconds):
    try:
        datetime(1970, 1, 1) + timedelta(0, seconds)
    except OverflowError as exc:
        message = str(exc)
    bad = workflow_started(0)
    bad.timestamp.seconds = seconds
    res = execute(CHAIN, instance_id="wf-1", past=start("chain"), new=[bad])
    assert list(res.actions) == [failed(2, "OverflowError", message)]


def test_pending_plain_call_gets_the_execution_id_of_its_turn():
    past = [*start("chain", t=0), task_scheduled(1, "echo", 0), workflow_started(5)]
    res = execute(CHAIN, instance_id="wf-1", past=past, new=[task_completed(1, 0, t=5), workflow_started(9)])
    assert list(res.actions) == [schedule(2, "echo", 1, execution_id=execution_id("wf-1", 5, 1))]
