"""conformance/retry_causes.py: a retry the worker did not make, read from a history, and what it re-charges."""

from __future__ import annotations

from conformance.attribution import judge, root_causes
from conformance.retry_causes import retry_policies, unretried
from conformance.verdict import Mismatch, Outcome, Subject
from taskhub_programs import parse_bundle
from taskhub_wire import pb
from tests.worker import histories as h

LEVELS = {"ACT-RETRY-001": "MUST", "CHILD-RETRY-001": "MUST", "HIST-DEDUP-001": "MUST"}


def _bundle(retry: dict | None, *, again: bool = False, child: bool = False) -> object:
    call = ({"call_child": {"workflow": "sub", **({"retry": retry} if retry else {})}} if child
            else {"call_activity": {"name": "fail", **({"retry": retry} if retry else {})}})
    steps = [call, *([{"call_activity": {"name": "fail"}}] if again else []), {"return": 1}]
    return parse_bundle({"programs": {"main": {"steps": steps}, "sub": {"steps": [{"return": 1}]}}})


def _failed_at_end(n: int = 10) -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=n)
    ev.executionCompleted.workflowStatus = pb.ORCHESTRATION_STATUS_FAILED
    ev.executionCompleted.failureDetails.errorMessage = "boom"
    return ev


def _history(*middle: pb.HistoryEvent) -> list[pb.HistoryEvent]:
    return [*h.start("main"), h.task_scheduled(0, "fail"), *middle, _failed_at_end()]


def test_a_failure_with_attempts_left_and_no_retry_is_a_cause():
    causes = unretried(_bundle({"max_attempts": 3, "first_delay": "1s"}), {"main-1": _history(h.task_failed(0))})
    assert set(causes) == {"main-1"}
    assert causes["main-1"].requirement == "ACT-RETRY-001"
    assert "activity 'fail'" in causes["main-1"].text and "1 attempt(s) of the 3" in causes["main-1"].text


def test_no_cause_where_the_worker_retried_or_could_not():
    retry = {"max_attempts": 3, "first_delay": "1s"}
    failed = h.task_failed(0)
    cases = {
        "a retry timer after the failure": (_bundle(retry), _history(failed, h.timer_created(1, 5))),
        "attempts used up": (_bundle({"max_attempts": 1, "first_delay": "1s"}), _history(failed)),
        "no policy": (_bundle(None), _history(failed)),
        "a total timeout may end the attempts": (_bundle({**retry, "timeout": "2s"}), _history(failed)),
        "the name is also called without a policy": (_bundle(retry, again=True), _history(failed)),
    }
    for what, (bundle, history) in cases.items():
        assert unretried(bundle, {"main-1": history}) == {}, what
    nonretriable = h.task_failed(0)
    nonretriable.taskFailed.failureDetails.isNonRetriable = True
    assert unretried(_bundle(retry), {"main-1": _history(nonretriable)}) == {}
    completed = [*h.start("main"), h.task_scheduled(0, "fail"), failed]
    assert unretried(_bundle(retry), {"main-1": completed}) == {}, "not terminal"


def test_a_child_not_retried_is_child_retry():
    bundle = _bundle({"max_attempts": 2, "first_delay": "1s"}, child=True)
    history = [*h.start("main"), h.child_created(0, "sub", "main-1:0"), h.child_failed(0), _failed_at_end()]
    assert unretried(bundle, {"main-1": history})["main-1"].requirement == "CHILD-RETRY-001"
    assert ("sub" in {name for _, name in retry_policies(bundle)})


def test_the_cause_takes_what_its_instance_shows_and_nothing_else():
    causes = unretried(_bundle({"max_attempts": 3, "first_delay": "1s"}), {"main-1": _history(h.task_failed(0))})
    status = Mismatch(text="expected status COMPLETED, got FAILED", subject=Subject.STATUS, instance="main-1")
    other = Mismatch(text="expected status COMPLETED, got FAILED", subject=Subject.STATUS, instance="other-1")
    charged = root_causes([status, other], {}, causes=causes)
    assert charged[0].requirement == "ACT-RETRY-001" and "[root cause: the worker did not retry" in charged[0].text
    assert charged[1] == other
    j = judge(charged[:1], requirements=["HIST-DEDUP-001"], levels=LEVELS)
    assert dict(j.per_requirement)["ACT-RETRY-001"] is Outcome.FAILED
    assert dict(j.per_requirement)["HIST-DEDUP-001"] is Outcome.PASSED
