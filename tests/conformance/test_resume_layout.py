"""Which pasts a worker that applies held events at once on resume never gets (conformance/dialects/resume.py)."""

from __future__ import annotations

from pathlib import Path

from conformance.dialects.resume import waits_between_released
from conformance.scenario.loader import load_scenario
from conformance.scenario.wire import parse_event

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
SENTINEL = "9999-12-31T23:59:59.999999999Z"


def _past(*events):
    return tuple(parse_event(e, index=i) for i, e in enumerate(events))


def _wait_timer(name: str, event_id: int):
    return {"TimerCreated": {"fireAt": SENTINEL, "externalEvent": {"name": name}}, "eventId": event_id}


def _vector_past(scenario_id: str):
    scenario = load_scenario(ROOT / f"{scenario_id}.yaml", root=ROOT)
    assert scenario.vector is not None
    return scenario.vector.past


def test_the_go_finding_is_a_past_of_waits_made_between_held_events():
    # The reference made wait timers for Go and go after the resume; the two held "go" events answer both.
    assert waits_between_released(_vector_past("regressions/durabletask-go-worker-63599a2507")) == ("go",)


def test_the_second_suspend_findings_are_not():
    # T2 (LIFE-SUSPEND-002): the resume is in the turn under test, and no wait timer follows a resume in the past.
    for h in ("68c873d84b", "6fe957104d", "bf94e9861b", "e7ed93d1dc", "ca90932391"):
        assert waits_between_released(_vector_past(f"regressions/durabletask-go-worker-{h}")) == (), h


def test_a_wait_pending_from_before_the_suspension_takes_the_held_event_either_way():
    # wait go (timer 1) was pending before the suspension; the one held event answers it on resume, and the
    # next wait go makes its timer whether the events are applied one at a time or at once.
    past = _past({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "p"}}, _wait_timer("go", 1),
                 {"WorkflowStarted": {}}, {"ExecutionSuspended": {}},
                 {"WorkflowStarted": {}}, {"EventRaised": {"name": "go"}},
                 {"WorkflowStarted": {}}, {"ExecutionResumed": {}}, _wait_timer("go", 2))
    assert waits_between_released(past) == ()
    # Two held events for one pending wait: the second wait would have found the second event buffered.
    two = _past({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "p"}}, _wait_timer("go", 1),
                {"WorkflowStarted": {}}, {"ExecutionSuspended": {}},
                {"WorkflowStarted": {}}, {"EventRaised": {"name": "go"}}, {"EventRaised": {"name": "Go"}},
                {"WorkflowStarted": {}}, {"ExecutionResumed": {}}, _wait_timer("GO", 2))
    assert waits_between_released(two) == ("go",)


def test_events_that_arrive_while_running_are_not_held():
    past = _past({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "p"}},
                 {"WorkflowStarted": {}}, {"EventRaised": {"name": "go"}}, {"EventRaised": {"name": "go"}},
                 {"ExecutionResumed": {}}, _wait_timer("go", 1))
    assert waits_between_released(past) == ()
