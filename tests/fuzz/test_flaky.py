"""A flaky fuzz finding is judged by asking the worker the same turn again (#21 item 5)."""

from __future__ import annotations

import io

from taskhub_wire import pb

from conformance.dialects.compare import Comparison
from conformance.fuzz.self_oracle import SelfOracleCampaign, stray_resume
from conformance.fuzz.worker_fuzz import FLAKY_REPLAYS, Finding, WorkerCampaign
from conformance.fuzz.interleave import TurnCase


def _answer(status: int | None) -> pb.WorkflowResponse:
    resp = pb.WorkflowResponse(instanceId="i")
    if status is not None:
        resp.actions.add(id=1).completeWorkflow.workflowStatus = status
    return resp


class _Worker:
    def __init__(self, answers):
        self.answers = list(answers)

    def answer(self, case):
        return self.answers.pop(0)


def _finding(got: pb.WorkflowResponse, kind: str = "semantics") -> Finding:
    case = TurnCase("i", (), (), "dispatched")
    return Finding(target="sdk", kind=kind, signature="completion.workflowStatus=running/FAILED", case=case,
                   workflow="p0", bundle_doc={}, ref=_answer(None), got=got,
                   comparison=Comparison((), "strict", {}, None), seed=0, round=0, flaky=True)


def _campaign() -> WorkerCampaign:
    return SelfOracleCampaign(target="sdk", make_worker=lambda *a: None, out=io.StringIO())


FAILED = pb.ORCHESTRATION_STATUS_FAILED


def test_two_answers_to_one_turn_are_an_sdk_nondeterminism():
    f = _finding(_answer(FAILED))
    worker = _Worker([_answer(FAILED), _answer(None)] + [_answer(FAILED)] * (FLAKY_REPLAYS - 2))
    assert _campaign()._judge_flaky(f, worker)
    assert (f.kind, f.requirement, f.flaky) == ("self-determinism", "RPL-DET-001", False)
    assert f.other is not None and "two ways" in f.judged and "[completeWorkflow] / []" in f.judged


def test_the_recorded_answer_every_time_reproduces():
    f = _finding(_answer(FAILED))
    assert _campaign()._judge_flaky(f, _Worker([_answer(FAILED)] * FLAKY_REPLAYS))
    assert not f.flaky and f.kind == "semantics" and f.judged.startswith("reproduced")


def test_another_answer_every_time_is_the_harness_not_a_finding():
    f = _finding(_answer(FAILED))
    campaign = _campaign()
    assert not campaign._judge_flaky(f, _Worker([_answer(None)] * FLAKY_REPLAYS))
    assert "did not reproduce" in campaign.out.getvalue()


def test_a_resume_of_a_running_instance_is_a_stray_resume():
    ws = pb.HistoryEvent(eventId=-1)
    ws.workflowStarted.SetInParent()
    resumed = pb.HistoryEvent(eventId=-1)
    resumed.executionResumed.SetInParent()
    suspended = pb.HistoryEvent(eventId=-1)
    suspended.executionSuspended.SetInParent()
    assert stray_resume(TurnCase("i", (ws,), (ws, resumed), "dispatched"))
    assert not stray_resume(TurnCase("i", (ws, suspended), (ws, resumed), "dispatched"))
