"""The management API: start, read, wait for, raise events on, terminate, suspend, resume, purge, list.

Each operation takes the engine lock, writes its change in one transaction and queues the turn
that will take it into history; none of them runs workflow code itself.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from typing import Callable, Iterable

from taskhub_core.actions import execution_started
from taskhub_core.history import status_name
from taskhub_core.inbox import will_be_suspended
from taskhub_core.timestamps import MAX_TIMESTAMP_NS
from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.model import NEVER_NS, Instance, InstanceView, ParentRef, ts, ts_ns
from fake_sidecar.engine.store import Tx
from fake_sidecar.engine.work import Work

log = logging.getLogger(__name__)

MAX_INSTANCE_ID = 1024
DEFAULT_PAGE = 1024


class Gone:
    """What a wait with `gone_is_done` returns when the instance was purged meanwhile (a retention of 0)."""


GONE = Gone()


def refuse_if_stalled(inst: Instance, op: str) -> None:
    if inst.stalled is not None and not inst.terminal:
        raise errors.FailedPrecondition(
            f"cannot {op} workflow instance '{inst.iid}': workflow is stalled "
            f"({pb.StalledReason.Name(inst.stalled[0])}: {inst.stalled[1].strip()}); "
            "connect a worker with compatible code, or purge it with force")


def validate_instance_id(iid: str) -> None:
    if len(iid) > MAX_INSTANCE_ID:
        raise errors.InvalidArgument(f"instance id is {len(iid)} characters long; the limit is {MAX_INSTANCE_ID}")
    bad = [c for c in iid if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise errors.InvalidArgument(f"instance id {iid!r} contains control characters; use printable characters")


class Management(Work):
    """The management API over the engine's state (core.py's `Engine` is one)."""

    def start_instance(self, *, instance_id: str, name: str, input: str | None,
                       scheduled_start_ns: int | None = None, enforce_unique: bool = False,
                       tags: dict[str, str] | None = None, app: str = "",
                       trace: pb.TraceContext | None = None) -> str:
        if not name:
            raise errors.InvalidArgument("StartInstance needs a workflow name (field 'name' is empty)")
        iid = instance_id or uuid.uuid4().hex
        validate_instance_id(iid)
        if scheduled_start_ns is not None and not 0 <= scheduled_start_ns <= MAX_TIMESTAMP_NS:
            raise errors.InvalidArgument("scheduledStartTimestamp is outside 0001-01-01..9999-12-31, the range of a "
                                         "protobuf Timestamp")
        with self.lock:
            self.check_open()
            now = self.ticker.now()
            # An empty input means none (JS clients send "").
            ev = execution_started(name=name, iid=iid, now_ns=now, input=input or None, execution_id=uuid.uuid4().hex)
            es = ev.executionStarted
            if scheduled_start_ns:
                es.scheduledStartTimestamp.CopyFrom(ts(scheduled_start_ns))
            for k, v in (tags or {}).items():
                es.tags[k] = v
            if trace is not None:  # the caller's trace, kept for what the instance schedules (as daprd)
                es.parentTraceContext.CopyFrom(trace)
            visible_at = min(scheduled_start_ns, NEVER_NS) if scheduled_start_ns and scheduled_start_ns > now else 0
            self._create(iid, ev, enforce_unique=enforce_unique, app=app, visible_at=visible_at)
        return iid

    def _create(self, iid: str, start: pb.HistoryEvent, *, enforce_unique: bool, visible_at: int = 0,
                parent: ParentRef | None = None, app: str = "") -> None:
        """Create (or reuse, R1.3 DAPR rules) instance `iid` with ExecutionStarted `start` in its inbox."""
        table = self.table
        tx = Tx()
        old = table.find(iid)
        generation = 0
        if old is not None:
            if not old.terminal:
                raise errors.AlreadyExists(f"an active workflow with ID '{iid}' already exists")
            if enforce_unique:
                raise errors.AlreadyExists(
                    f"workflow with ID '{iid}' already exists and the create enforces instance ID uniqueness")
            busy = [c for c in old.children if (child := table.find(c)) is not None and not child.terminal]
            if busy:
                raise errors.AlreadyExists(
                    f"workflow with ID '{iid}' cannot be reused while its child workflows {busy} are running")
            generation = old.generation + 1
            table.forget(old, tx)
        now = ts_ns(start.timestamp)
        es = start.executionStarted
        inst = Instance(iid=iid, seq=table.next_seq(tx), name=es.name, generation=generation,
                        execution_id=es.workflowInstance.executionId.value, created_ns=now,
                        last_updated_ns=now, parent=parent, app=app)
        table.put(inst)
        table.add_inbox(inst, start, tx, visible_at=visible_at)
        table.commit(tx, inst)
        self.dispatcher.maybe_queue(inst)
        table.notify(iid)

    def get_instance(self, iid: str) -> InstanceView | None:
        with self.lock:
            inst = self.table.find(iid)
            return self.table.view(inst) if inst is not None else None

    def wait(self, iid: str, pred: Callable[[InstanceView], bool], *, timeout: float | None,
             is_active: Callable[[], bool] = lambda: True, gone_is_done: bool = False) -> InstanceView | Gone | None:
        """Block until the instance exists and `pred(view)` holds; None on timeout or cancel. With
        `gone_is_done`, an instance that no longer exists ends the wait too (GONE)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        flag = threading.Event()
        with self.lock:
            self.table.watch(iid, flag)
        try:
            while True:
                with self.lock:
                    if self.closed:
                        raise errors.ShuttingDown("the sidecar is shutting down")
                    inst = self.table.find(iid)
                    if inst is not None:
                        view = self.table.view(inst)
                        if pred(view):
                            return view
                    elif gone_is_done:
                        return GONE
                    flag.clear()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                flag.wait(0.5 if remaining is None else min(0.5, remaining))
                if not is_active():
                    return None
        finally:
            with self.lock:
                self.table.unwatch(iid, flag)

    def raise_event(self, *, iid: str, name: str, input: str | None) -> None:
        if not name:
            raise errors.InvalidArgument("RaiseEvent needs an event name (field 'name' is empty)")
        with self.lock:
            self.check_open()
            inst = self.table.get(iid)
            refuse_if_stalled(inst, "raise an event on")
            if inst.terminal:
                return  # OK, dropped (R6.6)
            if not self.policy.admits_event(inst=inst, name=name):
                return
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.ticker.now()))
            ev.eventRaised.name = name
            if input is not None:
                ev.eventRaised.input.value = input
            self._queue_event(inst, ev)

    def terminate(self, *, iid: str, output: str | None, recursive: bool) -> None:
        with self.lock:
            self.check_open()
            inst = self.table.get(iid)
            refuse_if_stalled(inst, "terminate")
            if inst.terminal:
                return  # R3.17: terminating a finished instance changes nothing
            self.enqueue_terminate(inst, output=output, recurse=recursive)

    def suspend(self, *, iid: str, reason: str | None) -> None:
        """Queue ExecutionSuspended, also for an instance that is suspended already: both real engines
        record a second one (docs/engine-rules.md R6.7), and a worker must take it in its stride."""
        with self.lock:
            self.check_open()
            inst = self.table.get(iid)
            refuse_if_stalled(inst, "suspend")
            if inst.terminal:
                return
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.ticker.now()))
            ev.executionSuspended.SetInParent()
            if reason:
                ev.executionSuspended.input.value = reason
            self._queue_event(inst, ev)

    def resume(self, *, iid: str, reason: str | None) -> bool:
        """Queue ExecutionResumed; returns whether the instance was (or was about to be) suspended.

        A resume of a running instance is recorded too, as both real engines do; a worker must ignore
        it (the Dapr Python SDKs fail the workflow instead: a FAILED cell of theirs, not a rule of ours).
        """
        with self.lock:
            self.check_open()
            inst = self.table.get(iid)
            refuse_if_stalled(inst, "resume")
            if inst.terminal:
                return False
            was_suspended = will_be_suspended(inst.inbox, suspended=inst.suspended)
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.ticker.now()))
            ev.executionResumed.SetInParent()
            if reason:
                ev.executionResumed.input.value = reason
            self._queue_event(inst, ev)
            return was_suspended

    def _queue_event(self, inst: Instance, ev: pb.HistoryEvent) -> None:
        tx = Tx()
        self.table.add_inbox(inst, ev, tx)
        self.table.commit(tx)
        self.dispatcher.maybe_queue(inst)

    def purge(self, *, iid: str, recursive: bool, force: bool) -> int:
        with self.lock:
            self.check_open()
            inst = self.table.get(iid)
            tx = Tx()
            count = self._purge(inst, recursive=recursive, force=force, tx=tx)
            self.table.commit(tx)
            return count

    def purge_by_filter(self, *, created_from_ns: int | None, created_to_ns: int | None,
                        statuses: frozenset[int]) -> int:
        """PurgeInstanceFilter as the Dapr dialect defines it (createdTimeFrom, createdTimeTo,
        runtimeStatus): every finished instance created in [from, to) whose status is one of `statuses`
        (any final status when empty), each alone; running, suspended and stalled ones are left. Neither
        engine implements it (R6.9: "multi-instance purge is not implemented")."""
        with self.lock:
            self.check_open()
            chosen = [inst for inst in self.table.all()
                      if inst.terminal and (not statuses or inst.status in statuses)
                      and (created_from_ns is None or inst.created_ns >= created_from_ns)
                      and (created_to_ns is None or inst.created_ns < created_to_ns)]
            tx = Tx()
            for inst in chosen:
                self._purge(inst, recursive=False, force=False, tx=tx)
            self.table.commit(tx)
            return len(chosen)

    def purge_retained(self, inst: Instance) -> None:
        """The retention of a finished instance ran out: purge it alone, as daprd's retentioner does
        (its children have retentions of their own)."""
        tx = Tx()
        self._purge(inst, recursive=False, force=False, tx=tx)
        self.table.commit(tx)
        log.info("purged %s: its retention ran out", inst.iid)

    def _purge(self, inst: Instance, *, recursive: bool, force: bool, tx: Tx) -> int:
        if not force:
            refuse_if_stalled(inst, "purge")
            if not inst.terminal:
                raise errors.FailedPrecondition(
                    f"failed to purge workflow state: orchestration '{inst.iid}' has not yet completed "
                    f"(status {status_name(inst.status)}); terminate it first or purge with force")
        count = 0
        if recursive:
            for child in self.table.children_of(inst):
                count += self._purge(child, recursive=True, force=force, tx=tx)
        self.table.forget(inst, tx)
        self.table.notify(inst.iid)
        return count + 1

    def history(self, iid: str) -> list[pb.HistoryEvent]:
        with self.lock:
            inst = self.table.find(iid)
            if inst is None:
                raise errors.NotFound(f"workflow instance '{iid}' not found")
            return list(inst.history)

    def instance_ids(self) -> Iterable[str]:
        with self.lock:
            return self.table.ids()

    def list_instance_ids(self, *, page_size: int, token: str | None) -> tuple[list[str], str | None]:
        size = page_size or DEFAULT_PAGE
        after = ""
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
                if not after.startswith("after:"):
                    raise ValueError("bad prefix")
                after = after[len("after:"):]
            except Exception as exc:  # noqa: BLE001 - any decoding problem is the caller's bad token
                raise errors.InvalidArgument(
                    f"continuationToken {token!r} is not one this sidecar issued ({exc}); "
                    "pass the token from the previous ListInstanceIDs response unchanged") from exc
        with self.lock:
            ids = sorted(i for i in self.table.ids() if i > after)
        page = ids[:size]
        more = len(ids) > size
        next_token = base64.urlsafe_b64encode(f"after:{page[-1]}".encode()).decode() if more and page else None
        return page, next_token
