"""A hand-driven worker for engine tests: open GetWorkItems, read raw work items, answer by hand."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import grpc

from taskhub_wire import pb
from taskhub_wire.rpc import TASKHUB, TaskHubClient


@dataclass
class RawWorker:
    """One GetWorkItems stream whose items land in a queue; cancel() breaks the stream."""

    address: str
    capabilities: Iterable[int] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    items: "queue.Queue[pb.WorkItem]" = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.address)
        self.client = TaskHubClient(self.channel, metadata=self.metadata)
        self._call = self.client.stream("GetWorkItems", pb.GetWorkItemsRequest(capabilities=list(self.capabilities)))
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            for item in self._call:
                self.items.put(item)
        except grpc.RpcError:
            pass

    def next(self, timeout: float = 10.0) -> pb.WorkItem:
        return self.items.get(timeout=timeout)

    def next_workflow(self, timeout: float = 10.0) -> pb.WorkItem:
        item = self.next(timeout)
        assert item.HasField("workflowRequest"), f"expected a workflow work item, got {item}"
        return item

    def next_activity(self, timeout: float = 10.0) -> pb.WorkItem:
        item = self.next(timeout)
        assert item.HasField("activityRequest"), f"expected an activity work item, got {item}"
        return item

    def answer(self, item: pb.WorkItem, *actions: pb.WorkflowAction, token: str | None = None,
               custom_status: str | None = None, patches: Iterable[str] = (), version_name: str | None = None,
               rpc: str = "CompleteOrchestratorTask") -> None:
        resp = pb.WorkflowResponse(instanceId=item.workflowRequest.instanceId,
                                   completionToken=item.completionToken if token is None else token)
        resp.actions.extend(actions)
        if custom_status is not None:
            resp.customStatus.value = custom_status
        patches = list(patches)
        if patches or version_name is not None:
            resp.version.patches.extend(patches)
            if version_name is not None:
                resp.version.name = version_name
        self.client.call(rpc, resp, timeout=10)

    def complete_activity(self, item: pb.WorkItem, result: str | None = None, *, token: str | None = None,
                          failure: str | None = None) -> None:
        req = item.activityRequest
        resp = pb.ActivityResponse(instanceId=req.workflowInstance.instanceId, taskId=req.taskId,
                                   completionToken=item.completionToken if token is None else token)
        if failure is not None:
            resp.failureDetails.errorType = "Failure"
            resp.failureDetails.errorMessage = failure
        elif result is not None:
            resp.result.value = result
        self.client.call("CompleteActivityTask", resp, timeout=10)

    def cancel(self) -> None:
        self._call.cancel()
        self._thread.join(timeout=5)
        self.channel.close()


def schedule(action_id: int, name: str, input: str | None = None, *, task_execution_id: str = "") -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=action_id)
    a.scheduleTask.name = name
    if input is not None:
        a.scheduleTask.input.value = input
    a.scheduleTask.taskExecutionId = task_execution_id or f"te-{action_id}"
    return a


def timer(action_id: int, fire_at_ns: int) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=action_id)
    a.createTimer.fireAt.seconds, a.createTimer.fireAt.nanos = divmod(fire_at_ns, 1_000_000_000)
    a.createTimer.createTimer.SetInParent()
    return a


def complete(action_id: int, result: str | None = None, *, status: int = pb.ORCHESTRATION_STATUS_COMPLETED,
             carryover: Iterable[pb.HistoryEvent] = ()) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=action_id)
    a.completeWorkflow.workflowStatus = status
    if result is not None:
        a.completeWorkflow.result.value = result
    a.completeWorkflow.carryoverEvents.extend(carryover)
    return a


def child(action_id: int, name: str, input: str | None = None, instance_id: str = "") -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=action_id)
    a.createChildWorkflow.name = name
    a.createChildWorkflow.instanceId = instance_id
    if input is not None:
        a.createChildWorkflow.input.value = input
    return a


def kinds(events: Iterable[pb.HistoryEvent]) -> list[str]:
    from taskhub_wire.kinds import event_kind

    return [event_kind(e) for e in events]


__all__ = ["RawWorker", "TASKHUB", "child", "complete", "kinds", "schedule", "timer"]
