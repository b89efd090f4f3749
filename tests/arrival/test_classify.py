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
