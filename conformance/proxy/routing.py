"""Scenarios sharing one engine: every work item goes to the scenario that owns its instance.

An engine (daprd, durabletask-go) hands a work item to any connected GetWorkItems stream; it does
not route by workflow or activity name. When several scenarios run at once against one engine
(`--sidecar address`), each scenario's fault proxy would get the others' turns and activities, and
renaming workflows would not help: the worker that gets a turn of a name it lacks fails it.
So the proxies of one upstream share a router: each claims the instance ids its scenario starts
and the child ids its worker creates, and an item that reaches the wrong proxy is passed to the
owner's proxy, which treats it as its own (fault rules, transcript, its worker's stream). The
engine accepts the completion from the owner's connection: completions are keyed by instance and
task, not by stream.

With one scenario per engine (a fresh sidecar each) every item is the proxy's own, so nothing changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from google.protobuf.message import Message

from taskhub_wire.kinds import ActionKind


class Owner(Protocol):
    def accept_routed(self, raw: bytes) -> None: ...


class WorkItemRouter:
    """Instance id -> owning proxy, for all proxies in front of one upstream address."""

    _routers: dict[str, WorkItemRouter] = {}
    _routers_lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, Owner] = {}
        self._retired: set[str] = set()
        self._attached: set[Owner] = set()
        self._dispatched: dict[Any, tuple[Owner, Callable[[], None]]] = {}

    @classmethod
    def for_upstream(cls, upstream: str) -> WorkItemRouter:
        with cls._routers_lock:
            router = cls._routers.get(upstream)
            if router is None:
                router = cls._routers[upstream] = cls()
            return router

    def attach(self, owner: Owner) -> None:
        with self._lock:
            self._attached.add(owner)

    def claim(self, owner: Owner, instance_id: str) -> None:
        if not instance_id:
            return
        with self._lock:
            self._owners[instance_id] = owner
            self._retired.discard(instance_id)

    def release(self, owner: Owner) -> None:
        """The owner is gone: later items of its instances are dropped, not handed to a stranger."""
        with self._lock:
            orphans = [key for key, (o, _) in self._dispatched.items() if o is owner]
            callbacks = [self._dispatched.pop(key)[1] for key in orphans]
            mine = [iid for iid, o in self._owners.items() if o is owner]
            for iid in mine:
                del self._owners[iid]
            self._retired.update(mine)
            self._attached.discard(owner)
            # Retired ids stay retired when nobody is attached: a scenario that ran alone leaves work the
            # engine dispatches again after it (daprd: ~1 s later), which the next scenario's worker
            # must not get. A later claim of the same id (a fixed id, or a port reused) lifts it.
        for callback in callbacks:
            callback()

    def dispatched(self, key: Any, owner: Owner, on_completed: Callable[[], None]) -> None:
        """An item was read on one proxy's stream and handed to `owner`: call back when it is completed
        (or when the owner goes away, since then nobody will complete it)."""
        with self._lock:
            self._dispatched[key] = (owner, on_completed)

    def completed(self, key: Any) -> None:
        with self._lock:
            entry = self._dispatched.pop(key, None)
        if entry is not None:
            entry[1]()

    def route(self, instance_id: str) -> tuple[Owner | None, bool]:
        """(owner, retired). SDKs name a child `<parent>:<n>` by default, so a parent's owner owns it."""
        with self._lock:
            iid = instance_id
            while True:
                if iid in self._owners:
                    return self._owners[iid], False
                if iid in self._retired:
                    return None, True
                head, sep, _ = iid.rpartition(":")
                if not sep:
                    return None, False
                iid = head


def item_instance_id(item: Message | None) -> str:
    """The instance a GetWorkItems item is for ("" when it names none)."""
    if item is None:
        return ""
    kind = item.WhichOneof("request")
    if kind == "workflowRequest":
        return str(item.workflowRequest.instanceId)
    if kind == "activityRequest":
        return str(item.activityRequest.workflowInstance.instanceId)
    return ""


def item_key(item: Message) -> tuple[str, int | None]:
    """What a completion of this item names: the instance (a turn) or the instance and task (an activity)."""
    if item.WhichOneof("request") == "activityRequest":
        return (item_instance_id(item), int(item.activityRequest.taskId))
    return (item_instance_id(item), None)


def completion_key(response: Any) -> tuple[str, int | None]:
    """The item_key a CompleteActivityTask (ActivityResponse) or a turn's WorkflowResponse completes."""
    if hasattr(response, "taskId"):
        return (str(response.instanceId), int(response.taskId))
    return (str(response.instanceId), None)


def created_instance_ids(response: Any) -> list[str]:
    """Instance ids a worker's WorkflowResponse creates (children, detached workflows)."""
    out = []
    for action in getattr(response, "actions", ()):
        kind = action.WhichOneof("workflowActionType")
        if kind == ActionKind.CREATE_CHILD_WORKFLOW.field:
            out.append(action.createChildWorkflow.instanceId)
        elif kind == ActionKind.CREATE_DETACHED_WORKFLOW.field:
            out.append(action.createDetachedWorkflow.instanceId)
    return [iid for iid in out if iid]
