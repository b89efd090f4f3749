"""The worker campaigns' arrival-order targets: classified schedules, reported as Hypothesis events
and targets, tallied for the campaign's report."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st
from taskhub_programs import parse_bundle

from conformance.arrival.cells import TARGETS, Arrival, Cell, Construct
from conformance.fuzz.arrival import ArrivalTally
from conformance.fuzz.interleave import DataChooser, run_program

BUNDLE = parse_bundle({"programs": {"main": {"steps": [
    {"any": [{"wait_event": "approve"}, {"wait_event": "x"}], "as": "r"},
    {"call_activity": {"name": "echo", "input": 1}},
    {"return": "${r}"}]}}})


def test_schedules_reach_named_targets():
    tally = ArrivalTally()

    @settings(max_examples=60, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def example(data):
        run = run_program(BUNDLE, "main", None, DataChooser(data), instance_id="t")
        tally.observe(BUNDLE, [run])

    example()
    assert tally.counts and set(tally.counts) <= set(TARGETS)
    assert Cell(Construct.ANY, Arrival.LATER_TURN) in tally.counts
    assert Cell(Construct.ACTIVITY, Arrival.LATER_TURN) in tally.counts
    text = tally.describe()
    assert text.startswith("arrival-order targets reached: ") and "any x later turn" in text
