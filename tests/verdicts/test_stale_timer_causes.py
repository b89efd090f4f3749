"""conformance/stale_timer_causes.py: a wait's timeout that fired after its event, read from a history."""

from __future__ import annotations

from conformance.attribution import judge, root_causes
from conformance.stale_timer_causes import stale_timeouts
from conformance.verdict import Mismatch, Outcome, Subject
from tests.worker import histories as h

LEVELS = {"RPL-EXEC-001": "MUST", "RPL-ORDER-001": "MUST", "EVT-BUFFER-001": "MUST"}


def _wait(id: int, name: str) -> object:
    return h.timer_created(id, 3, origin="externalEvent", origin_value=name)


def test_a_timeout_fired_after_its_event_is_a_cause():
    history = [*h.start("main"), _wait(0, "go"), h.event_raised("go", 1), h.timer_fired(0, 3)]
    cause = stale_timeouts({"main-1": history})["main-1"]
    assert cause.requirement == "RPL-EXEC-001"
    assert "wait for event 'go'" in cause.text and "history event 4" in cause.text


def test_no_cause_where_the_timeout_won_or_the_event_was_for_another_wait():
    timed_out = [*h.start("main"), _wait(0, "go"), h.timer_fired(0, 3), h.event_raised("go", 1)]
    # Two waits of one name: the first event answers the first wait; the second wait's timeout is not stale.
    two = [*h.start("main"), _wait(0, "go"), _wait(1, "go"), h.event_raised("go", 1), h.timer_fired(1, 3)]
    buffered = [*h.start("main"), h.event_raised("go", 1), _wait(0, "go"), h.timer_fired(0, 3)]
    plain = [*h.start("main"), h.timer_created(0, 3), h.event_raised("go", 1), h.timer_fired(0, 3)]
    for what, history in (("timed out", timed_out), ("other wait", two), ("buffered", buffered), ("plain", plain)):
        assert stale_timeouts({"main-1": history}) == {}, what


def test_what_the_instance_shows_is_one_verdict_under_rpl_exec():
    history = [*h.start("main"), _wait(0, "go"), h.event_raised("go", 1), h.timer_fired(0, 3)]
    output = Mismatch(text='expected output "late", got "lost"', subject=Subject.OUTPUT, instance="main-1")
    charged = root_causes([output], {}, causes=stale_timeouts({"main-1": history}))
    assert charged[0].requirement == "RPL-EXEC-001" and "[root cause: a stale timeout" in charged[0].text
    j = judge(charged, requirements=["RPL-EXEC-001", "RPL-ORDER-001"], levels=LEVELS)
    assert dict(j.per_requirement)["RPL-EXEC-001"] is Outcome.FAILED
    assert dict(j.per_requirement)["RPL-ORDER-001"] is Outcome.PASSED
