"""The arrival classifier on hand-written histories: each names the cell its arrival order reaches,
and the same events in another order reach another cell."""

from __future__ import annotations

from taskhub_programs import parse_bundle

from conformance.arrival.cells import IMPOSSIBLE, TARGETS, Arrival, Cell, Construct
from conformance.arrival.classify import classify
from conformance.scenario.wire import parse_event

BUNDLE = parse_bundle({"programs": {"main": {"steps": [
    {"wait_event": "a"},
    {"any": [{"wait_event": "b"}, {"wait_event": "c"}], "as": "r"},
    {"wait_event": "d"},
    {"return": "${r}"}]}}})


def _history(*events):
    return [parse_event(e, index=i) for i, e in enumerate(events)]


START = ({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}},
         {"TimerCreated": {"fireAt": "9999-12-31T23:59:59.999999999Z", "externalEvent": {"name": "a"}}, "eventId": 1})


def test_member_event_already_in_history_is_before():
    history = _history(*START,
                       {"WorkflowStarted": {}}, {"EventRaised": {"name": "b", "input": "1"}},
                       {"WorkflowStarted": {}}, {"EventRaised": {"name": "a"}},
                       {"TimerCreated": {"fireAt": "9999-12-31T23:59:59.999999999Z", "externalEvent": {"name": "c"}},
                        "eventId": 2})
    cells = classify(BUNDLE, instance_id="i", history=history).cells
    assert Cell(Construct.ANY, Arrival.BEFORE) in cells
    assert Cell(Construct.ANY, Arrival.SAME_TURN) not in cells


def test_member_event_in_the_building_turn_is_same_turn_and_the_loser_is_late():
    history = _history(*START,
                       {"WorkflowStarted": {}}, {"EventRaised": {"name": "a"}}, {"EventRaised": {"name": "b"}},
                       {"EventRaised": {"name": "c"}})
    cells = classify(BUNDLE, instance_id="i", history=history).cells
    assert {Cell(Construct.ANY, Arrival.SAME_TURN), Cell(Construct.ANY, Arrival.LATE),
            Cell(Construct.EVENT, Arrival.LATER_TURN)} <= cells
    assert Cell(Construct.ANY, Arrival.BEFORE) not in cells
    assert Cell(Construct.EVENT, Arrival.REPLAY) not in cells
    # The same history, its second turn dispatched to a worker that did not build the first.
    replayed = classify(BUNDLE, instance_id="i", history=history, fresh=[1]).cells
    assert Cell(Construct.EVENT, Arrival.REPLAY) in replayed


def test_suspension_cells():
    history = _history(*START,
                       {"WorkflowStarted": {}}, {"ExecutionSuspended": {}}, {"EventRaised": {"name": "a"}},
                       {"WorkflowStarted": {}}, {"EventRaised": {"name": "b"}}, {"ExecutionSuspended": {}},
                       {"WorkflowStarted": {}}, {"ExecutionResumed": {}})
    cells = classify(BUNDLE, instance_id="i", history=history, fresh=[3]).cells
    suspend = {c.arrival for c in cells if c.construct is Construct.SUSPEND}
    assert suspend == {Arrival.SAME_TURN, Arrival.LATER_TURN, Arrival.DUPLICATE, Arrival.REPLAY}


def test_targets_leave_out_only_impossible_cells():
    assert len(TARGETS) + len(IMPOSSIBLE) == len(Construct) * len(Arrival)


def test_timeout_timer_after_its_event_is_a_late_timer():
    bundle = parse_bundle({"programs": {"main": {"steps": [
        {"wait_event": {"name": "b", "timeout": "10s"}, "as": "v"}, {"wait_event": "c"}]}}})
    timer = {"TimerCreated": {"fireAt": "2026-01-01T00:00:12Z", "externalEvent": {"name": "b"}}, "eventId": 1}
    on_time = _history({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}}, timer,
                       {"WorkflowStarted": {}}, {"TimerFired": {"timerId": 1, "fireAt": "2026-01-01T00:00:12Z"}})
    late = _history({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}}, timer,
                    {"WorkflowStarted": {}}, {"EventRaised": {"name": "b"}},
                    {"WorkflowStarted": {}}, {"TimerFired": {"timerId": 1, "fireAt": "2026-01-01T00:00:12Z"}})
    assert Cell(Construct.EVENT, Arrival.LATE_TIMER) not in classify(bundle, instance_id="i", history=on_time).cells
    assert Cell(Construct.EVENT, Arrival.LATER_TURN) in classify(bundle, instance_id="i", history=on_time).cells
    assert Cell(Construct.EVENT, Arrival.LATE_TIMER) in classify(bundle, instance_id="i", history=late).cells


RETRIED = {"call_activity": {"name": "fail", "input": 1, "retry": {"max_attempts": 2, "first_delay": "1s"}}}
FAILED_1 = {"TaskFailed": {"taskScheduledId": 1, "failureDetails": {"errorType": "E", "errorMessage": "no"}}}


def test_retry_timer_of_a_member_after_its_any_was_decided_is_a_late_timer():
    """What every engine delivers (engine-rules R6.11): the loser's retry timer fires after the race."""
    bundle = parse_bundle({"programs": {"main": {"steps": [
        {"any": [RETRIED, {"call_activity": {"name": "echo", "input": 2}}], "as": "r"}, {"wait_event": "c"}]}}})
    history = _history({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}},
                       {"TaskScheduled": {"name": "fail", "input": "1"}, "eventId": 1},
                       {"TaskScheduled": {"name": "echo", "input": "2"}, "eventId": 2},
                       {"WorkflowStarted": {}}, {"TaskCompleted": {"taskScheduledId": 2, "result": "2"}}, FAILED_1,
                       {"TimerCreated": {"fireAt": "2026-01-01T00:00:04Z", "activityRetry": {}}, "eventId": 3},
                       {"TimerCreated": {"fireAt": "9999-12-31T23:59:59.999999999Z", "externalEvent": {"name": "c"}},
                        "eventId": 4},
                       {"WorkflowStarted": {}}, {"TimerFired": {"timerId": 3, "fireAt": "2026-01-01T00:00:04Z"}})
    cells = classify(bundle, instance_id="i", history=history).cells
    assert Cell(Construct.INNER_IN_ANY, Arrival.LATE_TIMER) in cells


def test_retry_timer_fired_again_after_its_call_succeeded_is_a_duplicate():
    """retry x late timer is n/a: the call's own retry timer can only come again (R2.7), not late."""
    bundle = parse_bundle({"programs": {"main": {"steps": [RETRIED, {"wait_event": "c"}]}}})
    fired = {"TimerFired": {"timerId": 2, "fireAt": "2026-01-01T00:00:04Z"}}
    history = _history({"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}},
                       {"TaskScheduled": {"name": "fail", "input": "1"}, "eventId": 1},
                       {"WorkflowStarted": {}}, FAILED_1,
                       {"TimerCreated": {"fireAt": "2026-01-01T00:00:04Z", "activityRetry": {}}, "eventId": 2},
                       {"WorkflowStarted": {}}, fired, {"TaskScheduled": {"name": "fail", "input": "1"}, "eventId": 3},
                       {"WorkflowStarted": {}}, {"TaskCompleted": {"taskScheduledId": 3, "result": "1"}},
                       {"TimerCreated": {"fireAt": "9999-12-31T23:59:59.999999999Z", "externalEvent": {"name": "c"}},
                        "eventId": 4},
                       {"WorkflowStarted": {}}, fired)
    cells = classify(bundle, instance_id="i", history=history).cells
    assert Cell(Construct.RETRY, Arrival.DUPLICATE) in cells
    assert Cell(Construct.RETRY, Arrival.LATE_TIMER) in IMPOSSIBLE
    assert not any(c.arrival is Arrival.LATE_TIMER for c in cells)
