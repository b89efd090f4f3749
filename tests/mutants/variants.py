"""Deliberately broken engines and workers (mutants): each must turn specific scenarios red.

Each mutant replaces one hook of the reference engine or worker, so it differs from the
reference in exactly one behaviour.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from fake_sidecar.engine import Engine
from fake_sidecar.engine.model import Instance
from fake_worker.client import Worker
from taskhub_programs import Bundle
from fake_worker.replay import TurnResult, execute
from taskhub_wire import pb

from conformance.targets.base import Pair, SidecarTarget, WorkerTarget
from conformance.targets.reference import answer_dict, start_reference_sidecar, start_reference_worker
from conformance.targets.registry import load_targets


class IgnoresTokens(Engine):
    """Accepts any completion token: a zombie's stale answer is applied."""

    @staticmethod
    def _token_ok(current: str | None, sent: str) -> bool:
        return True


class AppliesCompletionTwice(Engine):
    """Applies a second completion of a settled activity again, and records it (no dedup)."""

    @staticmethod
    def _duplicate(inst: Instance, key: tuple[str, int], seen: set[tuple[str, int]]) -> bool:
        return False

    def complete_activity(self, resp: pb.ActivityResponse) -> str:
        outcome = super().complete_activity(resp)
        if outcome == "unknown":
            with self._lock:
                inst = self._instances.get(resp.instanceId)
                if inst is not None and resp.taskId in inst.opened["task"] and not inst.terminal:
                    from fake_sidecar.engine.model import ts
                    from fake_sidecar.engine.store import Tx

                    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
                    ev.taskCompleted.taskScheduledId = resp.taskId
                    if resp.HasField("result"):
                        ev.taskCompleted.result.CopyFrom(resp.result)
                    tx = Tx()
                    self._add_inbox(inst, ev, tx)
                    self._commit(tx)
                    self._maybe_queue(inst)
                    return "applied"
        return outcome


class NeverRedelivers(Engine):
    """Work out on a broken stream is forgotten instead of dispatched again."""

    def _redeliver(self, inst: Instance, kind: str, task_id: int, sid: int) -> None:
        if kind == "wf" and inst.turn is not None and inst.turn.stream == sid:
            inst.turn = None  # forgets the turn; activities stay "out" forever


class SkipsPatchCheck(Engine):
    """Never compares the worker's patches with history: no PATCH_MISMATCH stall."""

    def _decide(self, inst: Instance, turn: Any, resp: pb.WorkflowResponse) -> Any:
        saved, inst.patches = inst.patches, []
        try:
            return super()._decide(inst, turn, resp)
        finally:
            inst.patches = saved


class DropsEventsWhileSuspended(Engine):
    """Loses external events raised while an instance is suspended instead of keeping them."""

    def raise_event(self, *, iid: str, name: str, input: str | None) -> None:
        with self._lock:
            inst = self._instances.get(iid)
            if inst is not None and inst.suspended:
                return
        super().raise_event(iid=iid, name=name, input=input)


class ForgetsTimer(Engine):
    """Records TimerCreated but never fires the timer."""

    def _schedule_timer(self, inst: Instance, fired: pb.HistoryEvent, tx: Any) -> None:
        return None


def _reorder(result: TurnResult) -> TurnResult:
    return replace(result, actions=tuple(reversed(result.actions)))


def _reuse_ids(result: TurnResult) -> TurnResult:
    first = next((a.scheduleTask.taskExecutionId for a in result.actions if a.HasField("scheduleTask")), None)
    for a in result.actions:
        if a.HasField("scheduleTask") and first is not None:
            a.scheduleTask.taskExecutionId = first
    return result


WORKER_MUTATIONS = {"reorders-actions": _reorder, "reuses-task-execution-ids": _reuse_ids}


def _mutant_worker(mutation: Any) -> type[Worker]:
    class Mutant(Worker):
        def answer(self, req: pb.WorkflowRequest) -> TurnResult:
            return mutation(super().answer(req))

    return Mutant


def _mutant_replayer(mutation: Any):
    def make(bundle: Bundle):
        def replay(iid: str, past: Any, new: Any) -> dict[str, Any]:
            result = mutation(execute(bundle, instance_id=iid, past=past, new=new))
            return answer_dict(result.response(instance_id=iid, completion_token=""))

        return replay

    return make


ENGINE_MUTANTS = {
    "ignores-tokens": IgnoresTokens,
    "applies-completion-twice": AppliesCompletionTwice,
    "never-redelivers": NeverRedelivers,
    "skips-patch-check": SkipsPatchCheck,
    "drops-events-while-suspended": DropsEventsWhileSuspended,
    "forgets-timer": ForgetsTimer,
}


def mutant_pair(name: str) -> Pair:
    """The reference pair with one side replaced by mutant `name`."""
    targets = load_targets()
    sidecar, worker = targets.sidecar("reference"), targets.worker("reference")
    if name in ENGINE_MUTANTS:
        sidecar = SidecarTarget(name=f"mutant:{name}", kind="reference", capabilities=sidecar.capabilities,
                                starter=partial(start_reference_sidecar, engine_class=ENGINE_MUTANTS[name]),
                                reference=True)
    else:
        mutation = WORKER_MUTATIONS[name]
        worker = WorkerTarget(name=f"mutant:{name}", kind="reference", capabilities=worker.capabilities,
                              starter=partial(start_reference_worker, worker_class=_mutant_worker(mutation)),
                              replayer=_mutant_replayer(mutation), reference=True)
    return Pair(sidecar=sidecar, worker=worker)
