"""Deliberately broken engines and workers (mutants): each must turn specific scenarios red.

An engine mutant is the reference engine with one decision of its `EnginePolicy` replaced
(fake_sidecar/engine/policy.py), so it differs from the reference in exactly that behaviour and
runs the engine's own code for everything else. A worker mutant rewrites the reference worker's
answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from fake_sidecar.engine import EnginePolicy
from fake_sidecar.engine.model import Instance, WorkRef
from taskhub_core.timestamps import copy_event
from taskhub_core.turn import Decision
from fake_worker.client import Worker
from taskhub_programs import Bundle
from fake_worker.replay import TurnResult, execute
from taskhub_wire import pb

from conformance.targets.base import Pair, SidecarTarget, WorkerTarget
from conformance.targets.reference import answer_dict, start_reference_sidecar, start_reference_worker
from conformance.targets.registry import load_targets


class IgnoresTokens(EnginePolicy):
    """Accepts any completion token: a zombie's stale answer is applied."""

    def token_ok(self, *, current: str | None, sent: str, strict: bool) -> bool:
        return True


class AppliesCompletionTwice(EnginePolicy):
    """Applies a second completion of a settled activity again, and records it (no dedup)."""

    def is_duplicate(self, *, inst: Instance, key: tuple[str, int], seen: set[tuple[str, int]]) -> bool:
        return False

    def applies_unmatched_activity(self, *, inst: Instance, resp: pb.ActivityResponse) -> bool:
        return resp.taskId in inst.opened["task"] and not inst.terminal


class NeverRedelivers(EnginePolicy):
    """Work out on a broken stream is forgotten instead of dispatched again."""

    def redelivers(self, *, ref: WorkRef) -> bool:
        return False


class SkipsPatchCheck(EnginePolicy):
    """Never compares the worker's patches with history: no PATCH_MISMATCH stall."""

    def decide_turn(self, *, inst: Instance, new_events: list[pb.HistoryEvent], resp: pb.WorkflowResponse,
                    now_ns: int) -> Decision:
        saved, inst.patches = inst.patches, []
        try:
            return super().decide_turn(inst=inst, new_events=new_events, resp=resp, now_ns=now_ns)
        finally:
            inst.patches = saved


class DropsEventsWhileSuspended(EnginePolicy):
    """Loses external events raised while an instance is suspended instead of keeping them."""

    def admits_event(self, *, inst: Instance, name: str) -> bool:
        return not inst.suspended


class ForgetsTimer(EnginePolicy):
    """Records TimerCreated but never fires the timer."""

    def schedules_timer(self, *, inst: Instance, fired: pb.HistoryEvent) -> bool:
        return False


def _kind(ev: pb.HistoryEvent) -> str:
    return ev.WhichOneof("eventType") or ""


class _Restamps(EnginePolicy):
    """Base of the history-rule mutants: the turn is decided as the reference decides it, then one
    thing about the events it commits is changed (the history checks must catch each)."""

    def decide_turn(self, *, inst: Instance, new_events: list[pb.HistoryEvent], resp: pb.WorkflowResponse,
                    now_ns: int) -> Decision:
        out = super().decide_turn(inst=inst, new_events=new_events, resp=resp, now_ns=now_ns)
        return self.change(inst, out)

    def change(self, inst: Instance, out: Decision) -> Decision:
        return out


class UnstampedTimers(_Restamps):
    """R2.6: records TimerCreated without a timestamp."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        for ev in out.events:
            if _kind(ev) == "timerCreated":
                ev.ClearField("timestamp")
        return out


class BackdatedResults(_Restamps):
    """R2.6: stamps an activity's result before the TaskScheduled it answers."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        for ev in out.events:
            if _kind(ev) == "taskCompleted":
                ev.timestamp.FromNanoseconds(1_000_000_000)
        return out


class TimerFiredAtCreation(_Restamps):
    """R2.6 [DAPR]: stamps TimerFired with a time before its fireAt (as the standalone sidecar does)."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        for ev in out.events:
            if _kind(ev) == "timerFired":
                ev.timestamp.FromNanoseconds(ev.timerFired.fireAt.ToNanoseconds() - 1_000_000)
        return out


class RepeatsTurnTime(_Restamps):
    """R2.6: a turn that delivers a TimerFired gets the previous turn's WorkflowStarted time."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        previous = [e for e in inst.history if _kind(e) == "workflowStarted"]
        if previous and any(_kind(e) == "timerFired" for e in out.events):
            out.events[0].timestamp.CopyFrom(previous[-1].timestamp)
        return out


class ResultAfterActions(_Restamps):
    """R2.1: records an activity's result after the events the turn's answer made."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        results = [e for e in out.events if _kind(e) == "taskCompleted"]
        if not results:
            return out
        return replace(out, events=tuple(e for e in out.events if _kind(e) != "taskCompleted") + tuple(results))


class KeepsTimeoutTimers(_Restamps):
    """R6.3: an event that arrives first does not cancel its wait's timeout timer."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        return replace(out, cancel_event_timers=())


class TerminatesWithFailure(_Restamps):
    """R6.8: a terminated instance's ExecutionCompleted carries failureDetails."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        if out.completed is not None and out.completed.executionCompleted.workflowStatus == \
                pb.ORCHESTRATION_STATUS_TERMINATED:
            out.completed.executionCompleted.failureDetails.errorType = "Terminated"
        return out


class RecordsContinueAsNew(_Restamps):
    """R2.10: the continue-as-new completion is recorded, as the next generation's first carried event."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        can = out.continue_as_new
        if can is None:
            return out
        done = pb.HistoryEvent(eventId=-1, timestamp=out.events[0].timestamp)
        done.executionCompleted.workflowStatus = pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
        if can.input is not None:
            done.executionCompleted.result.value = can.input
        return replace(out, continue_as_new=replace(can, carry=(done, *can.carry)))


class UnroutedResults(_Restamps):
    """R2.13: records an activity's result without its TaskScheduled's router."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        for ev in out.events:
            if _kind(ev) == "taskCompleted":
                ev.ClearField("router")
        return out


class KeepsOldTimers(EnginePolicy):
    """R6.4: the timers an ending generation left pending still fire after continue-as-new."""

    def next_generation(self, *, inst: Instance, start: pb.HistoryEvent,
                        carry: tuple[pb.HistoryEvent, ...]) -> list[tuple[pb.HistoryEvent, int]]:
        old = [(e.event, e.visible_at) for e in inst.inbox if e.event.HasField("timerFired")]
        return super().next_generation(inst=inst, start=start, carry=carry) + old


class RecordsEventsTwice(_Restamps):
    """R6.5: records each raised event twice (a redelivered raise is not dropped)."""

    def change(self, inst: Instance, out: Decision) -> Decision:
        events: list[pb.HistoryEvent] = []
        for ev in out.events:
            events.append(ev)
            if _kind(ev) == "eventRaised":
                events.append(copy_event(ev))
        return replace(out, events=tuple(events))


class HoldsEventsWhileSuspended(EnginePolicy):
    """R6.7: an event raised while the instance is suspended waits out of its turns until the resume
    has committed (the engine blocks it, instead of the worker holding it)."""

    def holds(self, *, inst: Instance, event: pb.HistoryEvent) -> bool:
        return inst.suspended and event.HasField("eventRaised")


def _reorder(result: TurnResult, history: Sequence[pb.HistoryEvent]) -> TurnResult:
    return replace(result, actions=tuple(reversed(result.actions)))


def _reuse_ids(result: TurnResult, history: Sequence[pb.HistoryEvent]) -> TurnResult:
    first = next((a.scheduleTask.taskExecutionId for a in result.actions if a.HasField("scheduleTask")), None)
    for a in result.actions:
        if a.HasField("scheduleTask") and first is not None:
            a.scheduleTask.taskExecutionId = first
    return result


def _retry_reuses_action_id(result: TurnResult, history: Sequence[pb.HistoryEvent]) -> TurnResult:
    """The upstream bug of a retry that schedules its next attempt at the failed attempt's action id: a
    ScheduleTask of an activity whose earlier attempt failed in history takes that attempt's id."""
    failed = {e.taskFailed.taskScheduledId for e in history if e.HasField("taskFailed")}
    first = {e.taskScheduled.name: e.eventId for e in reversed(history)
             if e.HasField("taskScheduled") and e.eventId in failed}
    for a in result.actions:
        if a.HasField("scheduleTask") and a.scheduleTask.name in first:
            a.id = first[a.scheduleTask.name]
    return result


def _custom_status_encoded_twice(result: TurnResult, history: Sequence[pb.HistoryEvent]) -> TurnResult:
    """A custom status JSON-encoded a second time ("\"finishing\"" for "finishing")."""
    return replace(result, custom_status=None if result.custom_status is None else json.dumps(result.custom_status))


def _never_retries(result: TurnResult, history: Sequence[pb.HistoryEvent]) -> TurnResult:
    """The upstream bug of a policy that never retries (durabletask-dapr 0.2.0a9, dapr-ext-workflow 0.5.0 without
    a max_retry_interval): where the code would start a retry timer, the workflow fails with the last failure."""
    timer = next((a for a in result.actions if a.HasField("createTimer")
                  and (a.createTimer.HasField("activityRetry") or a.createTimer.HasField("childWorkflowRetry"))), None)
    if timer is None:
        return result
    last = next(e for e in reversed(history) if e.HasField("taskFailed") or e.HasField("childWorkflowInstanceFailed"))
    body = last.taskFailed if last.HasField("taskFailed") else last.childWorkflowInstanceFailed
    done = pb.WorkflowAction(id=timer.id)
    done.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_FAILED
    done.completeWorkflow.failureDetails.CopyFrom(body.failureDetails)
    return replace(result, actions=(done,))


WORKER_MUTATIONS = {"reorders-actions": _reorder, "reuses-task-execution-ids": _reuse_ids,
                    "retry-reuses-action-id": _retry_reuses_action_id, "never-retries": _never_retries,
                    "custom-status-encoded-twice": _custom_status_encoded_twice}


def _mutant_worker(mutation: Any) -> type[Worker]:
    class Mutant(Worker):
        def answer(self, req: pb.WorkflowRequest) -> TurnResult:
            return mutation(super().answer(req), [*req.pastEvents, *req.newEvents])

    return Mutant


def _mutant_replayer(mutation: Any):
    def make(bundle: Bundle):
        def replay(iid: str, past: Any, new: Any) -> dict[str, Any]:
            result = mutation(execute(bundle, instance_id=iid, past=past, new=new), [*past, *new])
            return answer_dict(result.response(instance_id=iid, completion_token=""))

        return replay

    return make


ENGINE_MUTANTS: dict[str, EnginePolicy] = {
    "ignores-tokens": IgnoresTokens(),
    "applies-completion-twice": AppliesCompletionTwice(),
    "never-redelivers": NeverRedelivers(),
    "skips-patch-check": SkipsPatchCheck(),
    "drops-events-while-suspended": DropsEventsWhileSuspended(),
    "forgets-timer": ForgetsTimer(),
    "unstamped-timers": UnstampedTimers(),
    "backdated-results": BackdatedResults(),
    "timer-fired-at-creation": TimerFiredAtCreation(),
    "repeats-turn-time": RepeatsTurnTime(),
    "result-after-actions": ResultAfterActions(),
    "keeps-timeout-timers": KeepsTimeoutTimers(),
    "terminates-with-failure": TerminatesWithFailure(),
    "records-continue-as-new": RecordsContinueAsNew(),
    "unrouted-results": UnroutedResults(),
    "keeps-old-timers": KeepsOldTimers(),
    "records-events-twice": RecordsEventsTwice(),
    "holds-events-while-suspended": HoldsEventsWhileSuspended(),
}


def mutant_pair(name: str) -> Pair:
    """The reference pair with one side replaced by mutant `name`."""
    targets = load_targets()
    sidecar, worker = targets.sidecar("reference"), targets.worker("reference")
    if name in ENGINE_MUTANTS:
        sidecar = SidecarTarget(name=f"mutant:{name}", kind="reference", capabilities=sidecar.capabilities,
                                starter=partial(start_reference_sidecar, policy=ENGINE_MUTANTS[name]),
                                reference=True)
    else:
        mutation = WORKER_MUTATIONS[name]
        worker = WorkerTarget(name=f"mutant:{name}", kind="reference", capabilities=worker.capabilities,
                              starter=partial(start_reference_worker, worker_class=_mutant_worker(mutation)),
                              replayer=_mutant_replayer(mutation), reference=True)
    return Pair(sidecar=sidecar, worker=worker)
