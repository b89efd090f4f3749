"""The engine: instances, dispatch to worker streams, tokens, timers, stalls.

One lock guards all state; every state change is written through the store in
one transaction (`Tx`) before anyone can observe it. Worker streams pull work
items with `take`; a work item is built when it is taken, so a turn carries
every inbox event that arrived until then.
"""

from __future__ import annotations

import base64
import enum
import heapq
import hmac
import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, TypeVar

from google.protobuf.message import DecodeError, Message

from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.clock import Clock
from fake_sidecar.engine.model import (
    NEVER_NS, Instance, InstanceView, InboxEntry, PendingActivity, Stream, Turn, ts, ts_ns, wire,
)
from fake_sidecar.engine.refusals import RefusalTracker
from fake_sidecar.engine.store import LoadedInstance, MemoryStore, SqliteStore, StoreError, Tx, damaged
from fake_sidecar.engine.turns import (
    ABANDON, STALL, Outcome, PayloadLimit, absorb, decide_turn, first_version_name, payload_size,
    resolution_key, status_name,
)

log = logging.getLogger("fake_sidecar.engine")
_M = TypeVar("_M", bound=Message)

MAX_INSTANCE_ID = 1024
MAX_TIMESTAMP_NS = 253402300799_999999999  # 9999-12-31T23:59:59.999999999Z
DEFAULT_PAGE = 1024
_IDLE_JUMP_NS = 50_000_000  # virtual clock: stay idle this long before jumping to the next timer


class TaskExecutionIdMode(enum.Enum):
    """Who makes ActivityRequest.taskExecutionId (the spec, "task execution id"):

    SPEC: the sidecar, a fresh id on every dispatch (a redelivery after a lease or a broken stream
    gets a new one, unlike task_id); the completion records the id of the attempt it answers.
    PASSTHROUGH: the SDK's ScheduleTask id unchanged on every dispatch, as durabletask-go and daprd do.
    """

    SPEC = "spec"
    PASSTHROUGH = "passthrough"


@dataclass(frozen=True)
class EngineConfig:
    activity_lease_s: float | None = None
    max_payload: int | None = None
    # PASSTHROUGH by default until the suite's R2.5 check (TaskCompleted repeats its TaskScheduled's id) is
    # re-judged: see docs/fuzzing.md, "Task execution ids".
    task_execution_id: TaskExecutionIdMode = TaskExecutionIdMode.PASSTHROUGH
    # The transport's message limit: nothing bigger may be dispatched, or the worker refuses it
    # and gets it again on every reconnect (issue 11).
    max_message_bytes: int | None = None
    strict_tokens: bool = False  # refuse completions without a token (see _token_ok)

    def payload_limit(self) -> PayloadLimit | None:
        """The tighter of --max-payload and --max-message-bytes, named by its flag."""
        limits = [PayloadLimit(limit=n, flag=flag) for n, flag in
                  ((self.max_payload, "--max-payload"), (self.max_message_bytes, "--max-message-bytes")) if n]
        return min(limits, key=lambda lim: lim.limit) if limits else None


@dataclass
class Counters:
    zombie_activity: int = 0
    zombie_turn: int = 0
    unknown_activity: int = 0
    unknown_turn: int = 0
    duplicate_dropped: int = 0
    abandoned_turns: int = 0
    redispatched_activities: int = 0


class Engine:
    def __init__(self, *, store: MemoryStore | SqliteStore, clock: Clock,
                 config: EngineConfig = EngineConfig()) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self._payload = config.payload_limit()
        self.counters = Counters()
        self._lock = threading.RLock()
        self._work = threading.Condition(self._lock)
        self._tick = threading.Condition(self._lock)
        self._instances: dict[str, Instance] = {}
        self._ready: deque[tuple[str, str, int]] = deque()
        self._due: list[tuple[int, str]] = []
        self._streams: dict[int, Stream] = {}
        self._next_sid = 1
        self._seq = 0
        self._last_ns = 0
        self._watchers: dict[str, set[threading.Event]] = {}
        self._closed = False
        self._ticker: threading.Thread | None = None
        self._vectors: dict[str, _Vector] = {}
        self._refusals = RefusalTracker()
        self._load()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the background thread that fires timers, expires leases and moves a virtual clock."""
        self._ticker = threading.Thread(target=self._tick_loop, name="engine-ticker", daemon=True)
        self._ticker.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._work.notify_all()
            self._tick.notify_all()
            for watchers in self._watchers.values():
                for w in watchers:
                    w.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self.store.close()

    def _load(self) -> None:
        with self._lock:  # queueing notifies the stream condition, which needs the lock
            self._load_locked()

    def _load_locked(self) -> None:
        loaded, counters = self.store.load()
        self._seq = counters.get("seq", 0)
        for li in loaded:
            inst = self._restore(li)
            self._instances[inst.iid] = inst
        for inst in self._instances.values():
            self._requeue(inst)

    def _requeue(self, inst: Instance) -> None:
        """Queue what a just-restored instance has pending: activities, due inbox events, a turn."""
        for act in inst.activities.values():
            if act.stream is None:
                self._queue_activity(inst, act)
        for entry in inst.inbox:
            if entry.visible_at < NEVER_NS:
                heapq.heappush(self._due, (entry.visible_at, inst.iid))
        if inst.stalled is not None:
            inst.parked = True
        try:
            self._maybe_queue(inst)
        except StoreError as exc:  # a damaged history: the instance waits, the others are served
            log.error("%s", exc.message)

    def _restore(self, li: LoadedInstance) -> Instance:
        """An instance from its stored rows; its history is read on first use (see `_warm`)."""
        m = li.meta
        fields = dict(iid=li.iid, seq=m["seq"], name=m["name"], generation=m["generation"],
                      execution_id=m["execution_id"], created_ns=m["created_ns"],
                      last_updated_ns=m["last_updated_ns"], custom_status=m["custom_status"],
                      stalled=tuple(m["stalled"]) if m["stalled"] else None, parent=m["parent"],
                      continuing=m.get("continuing", False))
        inst = Instance.restored(warm=self._warm, **fields) if self.store.durable else Instance(**fields)
        for seq, vis, gen, raw in li.inbox:
            inst.inbox.append(InboxEntry(seq=seq, visible_at=vis, gen=gen,
                                         event=self._parse(pb.HistoryEvent, raw, li.iid, f"inbox event seq {seq}")))
        for task_id, gen, raw in li.activities:
            inst.activities[task_id] = PendingActivity(
                task_id=task_id, gen=gen, request=self._parse(pb.ActivityRequest, raw, li.iid, f"activity {task_id}"))
        return inst

    def _warm(self, inst: Instance) -> None:
        raws = self.store.load_history(inst.iid)
        inst.warm_up(events=[self._parse(pb.HistoryEvent, raw, inst.iid, f"history event #{i}")
                             for i, raw in enumerate(raws)], absorb=absorb)

    def _parse(self, kind: type[_M], raw: bytes, iid: str, what: str) -> _M:
        try:
            return kind.FromString(raw)
        except (DecodeError, TypeError) as exc:
            raise StoreError(damaged(getattr(self.store, "path", ":memory:"), iid,
                                     f"its {what} is not a valid {kind.DESCRIPTOR.name} ({exc})")) from None

    # ----------------------------------------------------------------- helpers

    def now(self) -> int:
        """Strictly increasing timestamps: SDKs derive ids from WorkflowStarted times."""
        n = self.clock.now_ns()
        if n <= self._last_ns:
            n = self._last_ns + 1000
        self._last_ns = n
        return n

    def _next_seq(self, tx: Tx) -> int:
        self._seq += 1
        tx.counters["seq"] = self._seq
        return self._seq

    def _notify(self, iid: str) -> None:
        for w in self._watchers.get(iid, ()):
            w.set()

    def _view(self, inst: Instance) -> InstanceView:
        start = inst.start_event()
        completed = inst.completed.executionCompleted if inst.completed is not None else None
        name = inst.name
        inp = start.executionStarted.input.value if start is not None and start.executionStarted.HasField("input") else None
        version = first_version_name(inst.history) or None
        return InstanceView(
            iid=inst.iid, name=name, status=inst.status, created_ns=inst.created_ns,
            last_updated_ns=inst.last_updated_ns,
            started_ns=ts_ns(inst.history[0].timestamp) if inst.history else None,
            version=version, input=inp,
            output=completed.result.value if completed is not None and completed.HasField("result") else None,
            custom_status=inst.custom_status,
            failure=completed.failureDetails if completed is not None and completed.HasField("failureDetails") else None,
            parent_iid=inst.parent["iid"] if inst.parent else None,
            execution_id=inst.execution_id, stalled=inst.stalled,
        )

    def _commit(self, tx: Tx, *touched: Instance) -> None:
        """Write `tx`; if the store refuses it, memory goes back to what the database holds."""
        for inst in touched:
            tx.instances[inst.iid] = inst.meta()
        try:
            self.store.apply(tx)
        except errors.StoreFailed as exc:
            log.warning("%s", exc.message)
            self._roll_back(tx)
            raise

    def _roll_back(self, tx: Tx) -> None:
        """Reload every instance `tx` touched from the store, keeping what is out on streams."""
        iids = tx.touched()
        loaded, _ = self.store.load(iids)
        by_iid = {li.iid: li for li in loaded}
        for iid in iids:
            old = self._instances.pop(iid, None)
            li = by_iid.get(iid)
            if li is not None:
                inst = self._restore(li)
                if old is not None:
                    _keep_volatile(old, inst)
                self._instances[iid] = inst
                self._requeue(inst)
            self._notify(iid)

    def _add_inbox(self, inst: Instance, ev: pb.HistoryEvent, tx: Tx, *, visible_at: int = 0) -> None:
        entry = InboxEntry(seq=self._next_seq(tx), visible_at=visible_at, gen=inst.generation, event=ev)
        inst.inbox.append(entry)
        tx.inbox_add.append((inst.iid, entry.seq, entry.visible_at, entry.gen, wire(ev)))
        if visible_at and visible_at < NEVER_NS:
            heapq.heappush(self._due, (visible_at, inst.iid))
            self._tick.notify_all()

    def _maybe_queue(self, inst: Instance) -> None:
        """Queue a turn when the instance has visible inbox events and nothing in flight."""
        if inst.turn is not None or inst.queued or inst.parked:
            return
        now = self.clock.now_ns()
        if inst.retry_at > now:
            heapq.heappush(self._due, (inst.retry_at, inst.iid))
            self._tick.notify_all()
            return
        if any(e.visible_at <= now for e in inst.inbox) and self._startable(inst, now):
            inst.queued = True
            self._ready.append(("wf", inst.iid, 0))
            self._work.notify()

    @staticmethod
    def _startable(inst: Instance, now: int) -> bool:
        """No turn before the instance's ExecutionStarted is due: events wait for a scheduled start."""
        # The inbox decides first: reading `started` makes a cold instance read its history.
        starts = [e for e in inst.inbox if e.event.HasField("executionStarted")]
        if not starts or any(e.visible_at <= now for e in starts):
            return True
        return inst.started or inst.terminal

    def _queue_activity(self, inst: Instance, act: PendingActivity) -> None:
        if act.queued:
            return
        act.queued = True
        act.stream = None
        self._ready.append(("act", inst.iid, act.task_id))
        self._work.notify()

    def _get(self, iid: str) -> Instance:
        inst = self._instances.get(iid)
        if inst is None:
            raise errors.NotFound(f"no such instance exists: workflow instance '{iid}' not found")
        return inst

    @staticmethod
    def _refuse_if_stalled(inst: Instance, op: str) -> None:
        if inst.stalled is not None and not inst.terminal:
            raise errors.FailedPrecondition(
                f"cannot {op} workflow instance '{inst.iid}': workflow is stalled "
                f"({pb.StalledReason.Name(inst.stalled[0])}: {inst.stalled[1].strip()}); "
                "connect a worker with compatible code, or purge it with force")

    # ----------------------------------------------------------------- management API

    def start_instance(self, *, instance_id: str, name: str, input: str | None,
                       scheduled_start_ns: int | None = None, enforce_unique: bool = False,
                       tags: dict[str, str] | None = None) -> str:
        if not name:
            raise errors.InvalidArgument("StartInstance needs a workflow name (field 'name' is empty)")
        iid = instance_id or uuid.uuid4().hex
        _validate_instance_id(iid)
        if scheduled_start_ns is not None and not 0 <= scheduled_start_ns <= MAX_TIMESTAMP_NS:
            raise errors.InvalidArgument("scheduledStartTimestamp is outside 0001-01-01..9999-12-31, the range of a "
                                         "protobuf Timestamp")
        with self._lock:
            self._check_open()
            now = self.now()
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(now))
            es = ev.executionStarted
            es.name = name
            if input:  # an empty string means no input (JS clients send "")
                es.input.value = input
            es.workflowInstance.instanceId = iid
            es.workflowInstance.executionId.value = uuid.uuid4().hex
            if scheduled_start_ns:
                es.scheduledStartTimestamp.CopyFrom(ts(scheduled_start_ns))
            for k, v in (tags or {}).items():
                es.tags[k] = v
            self._create(iid, ev, enforce_unique=enforce_unique,
                         visible_at=min(scheduled_start_ns, NEVER_NS)
                         if scheduled_start_ns and scheduled_start_ns > now else 0)
        return iid

    def _create(self, iid: str, start: pb.HistoryEvent, *, enforce_unique: bool, visible_at: int = 0,
                parent: dict | None = None) -> None:
        """Create (or reuse, R1.3 DAPR rules) instance `iid` with ExecutionStarted `start` in its inbox."""
        tx = Tx()
        old = self._instances.get(iid)
        generation = 0
        if old is not None:
            if not old.terminal:
                raise errors.AlreadyExists(f"an active workflow with ID '{iid}' already exists")
            if enforce_unique:
                raise errors.AlreadyExists(
                    f"workflow with ID '{iid}' already exists and the create enforces instance ID uniqueness")
            busy = [c for c in old.children if c in self._instances and not self._instances[c].terminal]
            if busy:
                raise errors.AlreadyExists(
                    f"workflow with ID '{iid}' cannot be reused while its child workflows {busy} are running")
            generation = old.generation + 1
            self._forget(old, tx)
        now = ts_ns(start.timestamp)
        es = start.executionStarted
        inst = Instance(iid=iid, seq=self._next_seq(tx), name=es.name, generation=generation,
                        execution_id=es.workflowInstance.executionId.value, created_ns=now,
                        last_updated_ns=now, parent=parent)
        self._instances[iid] = inst
        self._add_inbox(inst, start, tx, visible_at=visible_at)
        self._commit(tx, inst)
        self._maybe_queue(inst)
        self._notify(iid)

    def _forget(self, inst: Instance, tx: Tx) -> None:
        tx.drop.add(inst.iid)
        self._instances.pop(inst.iid, None)
        inst.turn = None
        inst.activities.clear()
        inst.inbox.clear()

    def get_instance(self, iid: str) -> InstanceView | None:
        with self._lock:
            inst = self._instances.get(iid)
            return self._view(inst) if inst is not None else None

    def wait(self, iid: str, pred: Callable[[InstanceView], bool], *, timeout: float | None,
             is_active: Callable[[], bool] = lambda: True) -> InstanceView | None:
        """Block until the instance exists and `pred(view)` holds; None on timeout or cancel."""
        deadline = None if timeout is None else time.monotonic() + timeout
        flag = threading.Event()
        with self._lock:
            self._watchers.setdefault(iid, set()).add(flag)
        try:
            while True:
                with self._lock:
                    if self._closed:
                        raise errors.ShuttingDown("the sidecar is shutting down")
                    inst = self._instances.get(iid)
                    if inst is not None:
                        view = self._view(inst)
                        if pred(view):
                            return view
                    flag.clear()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                flag.wait(0.5 if remaining is None else min(0.5, remaining))
                if not is_active():
                    return None
        finally:
            with self._lock:
                ws = self._watchers.get(iid)
                if ws is not None:
                    ws.discard(flag)
                    if not ws:
                        del self._watchers[iid]

    def raise_event(self, *, iid: str, name: str, input: str | None) -> None:
        if not name:
            raise errors.InvalidArgument("RaiseEvent needs an event name (field 'name' is empty)")
        with self._lock:
            self._check_open()
            inst = self._get(iid)
            self._refuse_if_stalled(inst, "raise an event on")
            if inst.terminal:
                return  # OK, dropped (R6.6)
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
            ev.eventRaised.name = name
            if input is not None:
                ev.eventRaised.input.value = input
            tx = Tx()
            self._add_inbox(inst, ev, tx)
            self._commit(tx)
            self._maybe_queue(inst)

    def terminate(self, *, iid: str, output: str | None, recursive: bool) -> None:
        with self._lock:
            self._check_open()
            inst = self._get(iid)
            self._refuse_if_stalled(inst, "terminate")
            if inst.terminal:
                return  # R3.17: terminating a finished instance changes nothing
            self._enqueue_terminate(inst, output=output, recurse=recursive)

    def _enqueue_terminate(self, inst: Instance, *, output: str | None, recurse: bool,
                           tx: Tx | None = None) -> None:
        """Queue ExecutionTerminated; written in `tx` if given (a cascade commits with its cause)."""
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
        if output is not None:
            ev.executionTerminated.input.value = output
        ev.executionTerminated.recurse = recurse
        own = tx is None
        tx = Tx() if tx is None else tx
        # A not-yet-due scheduled start becomes due: the termination needs a turn to take effect.
        for entry in inst.inbox:
            if entry.event.HasField("executionStarted") and entry.visible_at:
                entry.visible_at = 0
                tx.inbox_add.append((inst.iid, entry.seq, 0, entry.gen, wire(entry.event)))
        self._add_inbox(inst, ev, tx)
        if own:
            self._commit(tx)
        self._maybe_queue(inst)

    def suspend(self, *, iid: str, reason: str | None) -> None:
        """Queue ExecutionSuspended, also for an instance that is suspended already: both real engines
        record a second one (docs/engine-rules.md R6.7), and a worker must take it in its stride."""
        with self._lock:
            self._check_open()
            inst = self._get(iid)
            self._refuse_if_stalled(inst, "suspend")
            if inst.terminal:
                return
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
            ev.executionSuspended.SetInParent()
            if reason:
                ev.executionSuspended.input.value = reason
            tx = Tx()
            self._add_inbox(inst, ev, tx)
            self._commit(tx)
            self._maybe_queue(inst)

    def resume(self, *, iid: str, reason: str | None) -> bool:
        """Queue ExecutionResumed; returns whether the instance was (or was about to be) suspended.

        A resume of a running instance is recorded too, as both real engines do; a worker must ignore
        it (the Dapr Python SDKs fail the workflow instead: a FAILED cell of theirs, not a rule of ours).
        """
        with self._lock:
            self._check_open()
            inst = self._get(iid)
            self._refuse_if_stalled(inst, "resume")
            if inst.terminal:
                return False
            was_suspended = self._will_be_suspended(inst)
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
            ev.executionResumed.SetInParent()
            if reason:
                ev.executionResumed.input.value = reason
            tx = Tx()
            self._add_inbox(inst, ev, tx)
            self._commit(tx)
            self._maybe_queue(inst)
            return was_suspended

    @staticmethod
    def _will_be_suspended(inst: Instance) -> bool:
        """Suspended once the markers already queued are committed: the last queued marker decides."""
        state = inst.suspended
        for entry in inst.inbox:
            if entry.event.HasField("executionSuspended"):
                state = True
            elif entry.event.HasField("executionResumed"):
                state = False
        return state

    def purge(self, *, iid: str, recursive: bool, force: bool) -> int:
        with self._lock:
            self._check_open()
            inst = self._get(iid)
            tx = Tx()
            count = self._purge(inst, recursive=recursive, force=force, tx=tx, top=True)
            self._commit(tx)
            return count

    def _purge(self, inst: Instance, *, recursive: bool, force: bool, tx: Tx, top: bool) -> int:
        if not force:
            self._refuse_if_stalled(inst, "purge")
            if not inst.terminal:
                raise errors.FailedPrecondition(
                    f"failed to purge workflow state: orchestration '{inst.iid}' has not yet completed "
                    f"(status {status_name(inst.status)}); terminate it first or purge with force")
        count = 0
        if recursive:
            for child_id in inst.children:
                child = self._instances.get(child_id)
                if child is not None and child.parent and child.parent.get("iid") == inst.iid:
                    count += self._purge(child, recursive=True, force=force, tx=tx, top=False)
        self._forget(inst, tx)
        self._notify(inst.iid)
        return count + 1

    def history(self, iid: str) -> list[pb.HistoryEvent]:
        with self._lock:
            inst = self._instances.get(iid)
            if inst is None:
                raise errors.NotFound(f"workflow instance '{iid}' not found")
            return list(inst.history)

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
        with self._lock:
            ids = sorted(i for i in self._instances if i > after)
        page = ids[:size]
        more = len(ids) > size
        next_token = base64.urlsafe_b64encode(f"after:{page[-1]}".encode()).decode() if more and page else None
        return page, next_token

    # ----------------------------------------------------------------- rerun

    def rerun(self, *, source: str, event_id: int, new_iid: str | None, input: str | None,
              overwrite_input: bool, new_child_iid: str | None) -> str:
        if not source:
            raise errors.InvalidArgument("RerunWorkflowFromEvent needs sourceInstanceID")
        new_id = new_iid or uuid.uuid4().hex
        if new_id == source:
            raise errors.InvalidArgument(
                "rerun workflow instance ID must be different from the original instance ID")
        _validate_instance_id(new_id)
        with self._lock:
            self._check_open()
            src = self._instances.get(source)
            if src is None:
                raise errors.NotFound(f"workflow instance does not exist with ID '{source}'")
            if not src.terminal:
                raise errors.InvalidArgument(f"'{source}' is not in a terminal state")
            if src.parent is not None:
                raise errors.InvalidArgument(f"'{source}': cannot rerun from child-workflows")
            idx = next((i for i, e in enumerate(src.history) if e.eventId == event_id
                        and e.WhichOneof("eventType") in _RERUNNABLE | {"detachedWorkflowInstanceCreated",
                                                                          "executionCompleted", "eventSent"}), None)
            if idx is None:
                raise errors.NotFound(f"'{source}' does not have history event with ID '{event_id}'")
            target = src.history[idx]
            kind = target.WhichOneof("eventType")
            if kind == "detachedWorkflowInstanceCreated":
                raise errors.InvalidArgument(f"cannot rerun from detached workflow creation event '{event_id}'")
            if kind not in _RERUNNABLE:
                raise errors.NotFound(
                    f"target event '{kind}' with ID '{event_id}' is not an event that can be rerun")
            if overwrite_input and kind == "timerCreated":
                raise errors.InvalidArgument(f"cannot write input to timer event '{event_id}'")
            if new_child_iid and kind != "childWorkflowInstanceCreated":
                raise errors.InvalidArgument(
                    "newChildWorkflowInstanceID can only be set when rerunning from a child workflow event")
            if new_id in self._instances:
                raise errors.AlreadyExists(f"workflow '{new_id}' has already been created")
            self._rerun(src, idx, new_id=new_id, input=input, overwrite=overwrite_input, new_child=new_child_iid)
        return new_id

    def _rerun(self, src: Instance, idx: int, *, new_id: str, input: str | None, overwrite: bool,
               new_child: str | None) -> None:
        """R8.3: copy resolved pairs before the target, then re-issue open operations and the target."""
        prefix = src.history[:idx]
        resolved: set[tuple[str, int]] = set()
        for ev in prefix:
            key = resolution_key(ev)
            if key is not None:
                resolved.add(key)
        copied: list[pb.HistoryEvent] = []
        reissue: list[pb.HistoryEvent] = []
        for ev in prefix:
            kind = ev.WhichOneof("eventType")
            group = {"taskScheduled": "task", "timerCreated": "timer", "childWorkflowInstanceCreated": "child"}.get(kind)
            if group is not None and (group, ev.eventId) not in resolved:
                reissue.append(ev)
                continue
            copied.append(ev)
        target = pb.HistoryEvent()
        target.CopyFrom(src.history[idx])
        body = getattr(target, target.WhichOneof("eventType"))
        body.rerunParentInstanceInfo.instanceID = src.iid
        if overwrite:
            body.ClearField("input")
            if input is not None:
                body.input.value = input
        if new_child and target.HasField("childWorkflowInstanceCreated"):
            target.childWorkflowInstanceCreated.instanceId = new_child
        reissue.append(target)
        tx = Tx()
        now = self.now()
        start = next(e for e in copied if e.HasField("executionStarted"))
        inst = Instance(iid=new_id, seq=self._next_seq(tx), name=start.executionStarted.name, generation=0,
                        execution_id=start.executionStarted.workflowInstance.executionId.value,
                        created_ns=now, last_updated_ns=now)
        for ev in copied + reissue:
            new_ev = pb.HistoryEvent()
            new_ev.CopyFrom(ev)
            if new_ev.HasField("childWorkflowInstanceCreated") and ev is not target:
                new_ev.childWorkflowInstanceCreated.instanceId = f"{new_id}:{ev.eventId & 0xFFFF:04x}"
            inst.history.append(new_ev)
            absorb(inst, new_ev)
            tx.history_append.append((new_id, len(inst.history) - 1, wire(new_ev)))
        self._instances[new_id] = inst
        for ev in inst.history[len(copied):]:
            self._reissue(inst, ev, tx)
        # A turn is needed so the workflow resumes; an empty WorkflowStarted-only turn is not allowed
        # by SDKs, so the re-issued operations' results drive it. A rerun with nothing open: none.
        self._commit(tx, inst)
        self._maybe_queue(inst)
        self._notify(new_id)

    def _reissue(self, inst: Instance, ev: pb.HistoryEvent, tx: Tx) -> None:
        if ev.HasField("taskScheduled"):
            st = ev.taskScheduled
            req = pb.ActivityRequest(name=st.name, taskId=ev.eventId, taskExecutionId=st.taskExecutionId)
            if st.HasField("input"):
                req.input.CopyFrom(st.input)
            req.workflowInstance.instanceId = inst.iid
            self._add_activity(inst, req, tx)
        elif ev.HasField("timerCreated"):
            fired = pb.HistoryEvent(eventId=-1)
            fired.timerFired.timerId = ev.eventId
            fired.timerFired.fireAt.CopyFrom(ev.timerCreated.fireAt)
            self._add_inbox(inst, fired, tx, visible_at=min(ts_ns(ev.timerCreated.fireAt), NEVER_NS))
        elif ev.HasField("childWorkflowInstanceCreated"):
            ce = ev.childWorkflowInstanceCreated
            start = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
            es = start.executionStarted
            es.name = ce.name
            if ce.HasField("input"):
                es.input.CopyFrom(ce.input)
            es.workflowInstance.instanceId = ce.instanceId
            es.workflowInstance.executionId.value = uuid.uuid4().hex
            es.parentInstance.taskScheduledId = ev.eventId
            es.parentInstance.name.value = inst.name
            es.parentInstance.workflowInstance.instanceId = inst.iid
            es.parentInstance.workflowInstance.executionId.value = inst.execution_id
            self._start_child(inst, ce.instanceId, start, ev.eventId, tx)

    # ----------------------------------------------------------------- worker streams

    def open_stream(self, *, stateful: bool = False) -> int:
        with self._lock:
            self._check_open()
            sid = self._next_sid
            self._next_sid += 1
            self._streams[sid] = Stream(sid=sid, stateful=stateful)
            # A (re)connecting worker may carry fixed code: retry stalled instances (§7, R7.4).
            for inst in self._instances.values():
                if inst.parked:
                    inst.parked = False
                    self._maybe_queue(inst)
            return sid

    def close_stream(self, sid: int) -> None:
        """Redeliver everything that was out on the stream (R4.6 a, R5.3)."""
        with self._lock:
            stream = self._streams.pop(sid, None)
            if stream is None:
                return
            for kind, iid, task_id in stream.out:
                inst = self._instances.get(iid)
                if inst is not None:
                    self._redeliver(inst, kind, task_id, sid)
            self._work.notify_all()

    # Hooks: single points of behaviour that the harness's tests replace in deliberately broken
    # engines (mutants), to prove that the scenarios catch each kind of bug.

    def _redeliver(self, inst: Instance, kind: str, task_id: int, sid: int) -> None:
        if kind == "wf" and inst.turn is not None and inst.turn.stream == sid:
            inst.turn = None
            self.counters.abandoned_turns += 1
            self._refusals.lost((kind, inst.iid, 0))
            self._maybe_queue(inst)
        elif kind == "act":
            act = inst.activities.get(task_id)
            if act is not None and act.stream == sid:
                self.counters.redispatched_activities += 1
                self._refusals.lost((kind, inst.iid, task_id))
                self._queue_activity(inst, act)

    def _refused(self, inst: Instance, key: tuple[str, str, int], size: int) -> bool:
        """Hold back a big item that its streams kept dropping unanswered (see refusals.py)."""
        held = self._refusals.dispatching(key, size, limit=self.config.max_message_bytes)
        if held is not None:
            self._stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, held))
        return held is not None

    def _token_ok(self, current: str | None, sent: str) -> bool:
        """Any non-empty token must be the current dispatch's (compared in constant time).

        An empty token is accepted (legacy workers lack the field; durabletask-go and daprd accept
        it too) unless the engine runs with strict_tokens: then it is refused like a stale one.
        """
        if not sent:
            return not self.config.strict_tokens
        return current is not None and hmac.compare_digest(sent.encode(), current.encode())

    def _ignore_completion(self, what: str, sent: str) -> None:
        if sent:
            log.info("ignored stale %s (zombie token)", what)
        else:
            log.warning("ignored %s without a completionToken (--strict-tokens); a worker that lacks the "
                        "field needs a sidecar without --strict-tokens", what)

    @staticmethod
    def _duplicate(inst: Instance, key: tuple[str, int], seen: set[tuple[str, int]]) -> bool:
        return key in inst.resolved or key in seen

    def _decide(self, inst: Instance, turn: Turn, resp: pb.WorkflowResponse) -> Outcome:
        return decide_turn(inst, turn.new_events, resp, now_ns=self.now())

    def _schedule_timer(self, inst: Instance, fired: pb.HistoryEvent, tx: Tx) -> None:
        fire_ns = min(ts_ns(fired.timerFired.fireAt), NEVER_NS)
        self._add_inbox(inst, fired, tx, visible_at=max(fire_ns, 1))

    def connected_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def take(self, sid: int, *, timeout: float) -> pb.WorkItem | None:
        """The next work item for stream `sid`, or None after `timeout` seconds."""
        with self._lock:
            if sid not in self._streams:
                raise errors.ShuttingDown("work item stream closed")
            item = self._take_ready(sid)
            if item is None:
                self._work.wait(timeout)
                if self._closed:
                    raise errors.ShuttingDown("shutting down")
                if sid not in self._streams:
                    raise errors.ShuttingDown("work item stream closed")
                item = self._take_ready(sid)
            return item

    def _take_ready(self, sid: int) -> pb.WorkItem | None:
        while self._ready:
            kind, iid, task_id = self._ready.popleft()
            if kind == "vec":
                vec = self._vectors.get(iid)
                if vec is not None and vec.stream is None:
                    vec.stream = sid
                    return vec.item
                continue
            inst = self._instances.get(iid)
            if inst is None:
                continue
            if kind == "act":
                act = inst.activities.get(task_id)
                if act is None or not act.queued:
                    continue
                act.queued = False
                if self._refused(inst, ("act", iid, task_id), act.request.ByteSize()):
                    continue
                return self._dispatch_activity(sid, inst, act)
            if not inst.queued:
                continue
            inst.queued = False
            item = self._dispatch_turn(sid, inst)
            if item is not None:
                return item
        return None

    def _dispatch_activity(self, sid: int, inst: Instance, act: PendingActivity) -> pb.WorkItem:
        act.token = uuid.uuid4().hex
        act.stream = sid
        act.dispatched_at = self.clock.now_ns()
        act.dispatches += 1
        if self.config.task_execution_id is TaskExecutionIdMode.SPEC:
            # Kept on the pending activity, so the completion of this attempt records it (a stale
            # answer of an earlier attempt is refused by its token).
            act.request.taskExecutionId = str(uuid.uuid4())
        self._streams[sid].out.add(("act", inst.iid, act.task_id))
        if self.config.activity_lease_s:
            heapq.heappush(self._due, (act.dispatched_at + int(self.config.activity_lease_s * 1e9), inst.iid))
            self._tick.notify_all()
        item = pb.WorkItem(completionToken=act.token)
        item.activityRequest.CopyFrom(act.request)
        return item

    def _dispatch_turn(self, sid: int, inst: Instance) -> pb.WorkItem | None:
        now = self.clock.now_ns()
        visible = [e for e in inst.inbox if e.visible_at <= now]
        if not visible or not self._startable(inst, now):
            return None
        if inst.terminal:
            self._drop_for_terminal(inst, visible)
            return None
        oversize = self._payload.workflow_oversize(payload_size(inst)) if self._payload else None
        if oversize is not None:
            self._stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
            return None
        ws = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
        ws.workflowStarted.SetInParent()
        delivered: list[pb.HistoryEvent] = [ws]
        consumed: list[int] = []
        seen: set[tuple[str, int]] = set()
        have_start = inst.started
        for entry in visible:
            ev = entry.event
            consumed.append(entry.seq)
            key = resolution_key(ev)
            if key is not None:
                if self._duplicate(inst, key, seen):
                    self.counters.duplicate_dropped += 1
                    continue  # R2.7: duplicate resolution, neither delivered nor stored
                seen.add(key)
            if ev.HasField("executionStarted"):
                if have_start:
                    continue
                have_start = True
            delivered.append(ev)
        token = uuid.uuid4().hex
        stream = self._streams[sid]
        past = inst.history
        req = pb.WorkflowRequest(instanceId=inst.iid)
        req.executionId.value = inst.execution_id
        # What this stream was sent counts only for the same execution: after continue-as-new or a
        # new start under the id, another stream may have carried the new history past that count.
        execution, warm = stream.warm.get(inst.iid, ("", 0)) if stream.stateful else ("", 0)
        if execution != inst.execution_id:
            warm = 0
        if 0 < warm <= len(past):
            req.pastEvents.extend(past[warm:])
            req.cachedHistory.eventCount = warm
        else:
            req.pastEvents.extend(past)
        req.newEvents.extend(delivered)
        # The message as sent (framing included) must fit too, or the worker refuses it on every dispatch.
        size = req.ByteSize() + len(token) + 8
        oversize = self._payload.workflow_oversize(size) if self._payload else None
        if oversize is not None:
            self._stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
            return None
        if self._refused(inst, ("wf", inst.iid, 0), size):
            return None
        if stream.stateful:
            stream.warm[inst.iid] = (inst.execution_id, len(past))
        inst.turn = Turn(token=token, stream=sid, new_events=delivered, consumed=consumed, past_len=len(past))
        stream.out.add(("wf", inst.iid, 0))
        item = pb.WorkItem(completionToken=token)
        item.workflowRequest.CopyFrom(req)
        return item

    def _drop_for_terminal(self, inst: Instance, visible: list[InboxEntry]) -> None:
        """R3.17: events for a finished instance are consumed and discarded (a recursive terminate still cascades)."""
        tx = Tx()
        for entry in visible:
            inst.inbox.remove(entry)
            tx.inbox_delete.append((inst.iid, entry.seq))
            et = entry.event.executionTerminated if entry.event.HasField("executionTerminated") else None
            if et is not None and et.recurse:
                self._cascade_terminate(inst, et.input.value if et.HasField("input") else None, tx)
        self._commit(tx)

    def _cascade_terminate(self, inst: Instance, output: str | None, tx: Tx) -> None:
        for child_id in inst.children:
            child = self._instances.get(child_id)
            if child is not None and child.parent and child.parent.get("iid") == inst.iid and not child.terminal:
                self._enqueue_terminate(child, output=output, recurse=True, tx=tx)

    # ----------------------------------------------------------------- completions

    def complete_activity(self, resp: pb.ActivityResponse) -> str:
        """Apply an activity result; returns 'applied', 'stale' or 'unknown' (all answered OK)."""
        with self._lock:
            self._check_open()
            inst = self._instances.get(resp.instanceId)
            act = inst.activities.get(resp.taskId) if inst is not None else None
            if inst is None or act is None:
                self.counters.unknown_activity += 1
                log.info("ignored CompleteActivityTask for %s/%s: no pending dispatch", resp.instanceId, resp.taskId)
                return "unknown"
            if not self._token_ok(act.token, resp.completionToken):
                self.counters.zombie_activity += 1
                self._ignore_completion(f"CompleteActivityTask for {resp.instanceId}/{resp.taskId}",
                                        resp.completionToken)
                return "stale"
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
            if resp.HasField("failureDetails"):
                ev.taskFailed.taskScheduledId = resp.taskId
                ev.taskFailed.failureDetails.CopyFrom(resp.failureDetails)
                ev.taskFailed.taskExecutionId = act.request.taskExecutionId
            else:
                ev.taskCompleted.taskScheduledId = resp.taskId
                if resp.HasField("result"):
                    ev.taskCompleted.result.CopyFrom(resp.result)
                ev.taskCompleted.taskExecutionId = act.request.taskExecutionId
            self._refusals.answered(("act", inst.iid, resp.taskId))
            tx = Tx()
            del inst.activities[resp.taskId]
            tx.activity_delete.append((inst.iid, resp.taskId))
            if act.stream is not None and act.stream in self._streams:
                self._streams[act.stream].out.discard(("act", inst.iid, resp.taskId))
            self._add_inbox(inst, ev, tx)
            self._commit(tx)
            self._maybe_queue(inst)
            return "applied"

    def complete_turn(self, resp: pb.WorkflowResponse) -> str:
        """Apply a workflow turn; returns 'applied', 'stalled', 'abandoned', 'stale' or 'unknown'."""
        with self._lock:
            self._check_open()
            vec = self._vector_for(resp)
            if vec is not None:
                vec.response = resp
                vec.done.set()
                return "vector"
            inst = self._instances.get(resp.instanceId)
            if inst is None or inst.turn is None:
                self.counters.unknown_turn += 1
                log.info("ignored CompleteWorkflowTask for %s: no turn in flight", resp.instanceId)
                return "unknown"
            turn = inst.turn
            if not self._token_ok(turn.token, resp.completionToken):
                self.counters.zombie_turn += 1
                self._ignore_completion(f"CompleteWorkflowTask for {resp.instanceId}", resp.completionToken)
                return "stale"
            inst.turn = None
            self._refusals.answered(("wf", inst.iid, 0))
            if turn.stream in self._streams:
                self._streams[turn.stream].out.discard(("wf", inst.iid, 0))
            try:
                outcome = self._decide(inst, turn, resp)
            except Exception as exc:  # noqa: BLE001 - a bad answer must never lose the turn
                log.exception("could not apply the answer for %s", inst.iid)
                outcome = Outcome(ABANDON, reason=f"the answer could not be applied: {exc!r}")
            if outcome.kind == ABANDON:
                self._abandon(inst, outcome.reason)
                return "abandoned"
            if outcome.kind == STALL:
                assert outcome.stall is not None
                self._stall(inst, outcome.stall)
                return "stalled"
            if self._payload:
                for req in outcome.activities:
                    oversize = self._payload.activity_oversize(req)
                    if oversize is not None:
                        self._stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
                        return "stalled"
            self._apply(inst, turn, outcome)
            return "applied"

    def _abandon(self, inst: Instance, reason: str) -> None:
        """R3.13: the turn is redelivered later (backing off), the RPC still answers OK."""
        self.counters.abandoned_turns += 1
        inst.retries += 1
        delay_s = 0 if inst.retries == 1 else min(inst.retries - 1, 5)
        inst.retry_at = self.clock.now_ns() + int(delay_s * 1e9)
        log.warning("abandoned the turn of %s (%s); redelivering in %ss", inst.iid, reason, delay_s)
        self._maybe_queue(inst)

    def _stall(self, inst: Instance, stall: tuple[int, str]) -> None:
        """§7: drop the turn, keep the inbox, record one ExecutionStalled, park until a worker connects."""
        tx = Tx()
        last = inst.history[-1] if inst.history else None
        same = (last is not None and last.HasField("executionStalled")
                and last.executionStalled.description == stall[1])
        if not same:
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
            ev.executionStalled.reason = stall[0]
            ev.executionStalled.description = stall[1]
            inst.history.append(ev)
            tx.history_append.append((inst.iid, len(inst.history) - 1, wire(ev)))
            inst.last_updated_ns = ts_ns(ev.timestamp)
        inst.stalled = stall
        inst.parked = True
        log.warning("workflow %s is STALLED: %s", inst.iid, stall[1])
        self._commit(tx, inst)
        self._notify(inst.iid)

    def _apply(self, inst: Instance, turn: Turn, out: Outcome) -> None:
        tx = Tx()
        inst.custom_status = out.custom_status
        consumed = set(turn.consumed)
        for entry in [e for e in inst.inbox if e.seq in consumed]:
            inst.inbox.remove(entry)
            tx.inbox_delete.append((inst.iid, entry.seq))
        for ev in out.events:
            inst.history.append(ev)
            absorb(inst, ev)
            tx.history_append.append((inst.iid, len(inst.history) - 1, wire(ev)))
        if out.events:
            inst.last_updated_ns = ts_ns(out.events[-1].timestamp) or self.clock.now_ns()
        for name in out.cancel_event_timers:
            self._cancel_event_timer(inst, name, tx)
        for req in out.activities:
            self._add_activity(inst, req, tx)
        for _timer_id, fired in out.timers:
            self._schedule_timer(inst, fired, tx)
        for child in out.children:
            self._start_child(inst, child.iid, child.start, child.parent_task_id, tx, detached=child.detached)
        for target_id, ev in out.sends:
            target = self._instances.get(target_id)
            if target is None or target.terminal:
                log.info("dropped a message from %s to %s: no such running instance", inst.iid, target_id)
                continue
            self._add_inbox(target, ev, tx)
            self._maybe_queue(target)
        if out.continue_as_new is not None:
            self._continue_as_new(inst, out.continue_as_new, tx)
        if inst.terminal:
            self._finish(inst, tx)
        if out.terminate_cascade is not None and out.terminate_cascade[1]:
            self._cascade_terminate(inst, out.terminate_cascade[0], tx)
        try:
            self._commit(tx, inst)
        except errors.StoreFailed:
            restored = self._instances.get(inst.iid)
            if restored is not None:  # redeliver the turn later, not in a tight loop against a full disk
                self._abandon(restored, "the database refused to commit it")
            raise
        inst.retries = 0  # only now: a refused commit keeps backing off
        self._maybe_queue(inst)
        self._notify(inst.iid)

    def _add_activity(self, inst: Instance, req: pb.ActivityRequest, tx: Tx) -> None:
        act = PendingActivity(task_id=req.taskId, gen=inst.generation, request=req)
        inst.activities[req.taskId] = act
        tx.activity_put.append((inst.iid, req.taskId, inst.generation, wire(req)))
        self._queue_activity(inst, act)

    def _cancel_event_timer(self, inst: Instance, name: str, tx: Tx) -> None:
        """R6.3 (DAPR): a committed EventRaised deletes the oldest pending timeout timer of its wait."""
        folded = name.casefold()
        pending = sorted((e for e in inst.inbox if e.event.HasField("timerFired") and e.visible_at > 0
                          and inst.timer_event_names.get(e.event.timerFired.timerId, "").casefold() == folded),
                         key=lambda e: e.event.timerFired.timerId)
        if pending and pending[0].visible_at > self.clock.now_ns():
            inst.inbox.remove(pending[0])
            tx.inbox_delete.append((inst.iid, pending[0].seq))

    def _start_child(self, parent: Instance, child_id: str, start: pb.HistoryEvent, task_id: int, tx: Tx,
                     *, detached: bool = False) -> None:
        existing = self._instances.get(child_id)
        parent_ref = None if detached else {"iid": parent.iid, "task_id": task_id, "name": parent.name,
                                            "exec_id": parent.execution_id}
        if existing is not None:
            # The same create again means the same parent execution: a later generation that
            # reuses the action id (and so the default child id) creates the child afresh.
            owner = existing.parent or {}
            same_owner = owner.get("iid") == parent.iid and owner.get("task_id") == task_id and \
                owner.get("exec_id", parent.execution_id) == parent.execution_id
            if same_owner and not detached:
                return  # idempotent retry of the same create (R3.5 DAPR)
            if not existing.terminal:
                if not detached:
                    fail = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
                    fail.childWorkflowInstanceFailed.taskScheduledId = task_id
                    fd = fail.childWorkflowInstanceFailed.failureDetails
                    fd.errorType = "WorkflowInstanceAlreadyExists"
                    fd.errorMessage = f"a workflow with ID '{child_id}' is already running"
                    self._add_inbox(parent, fail, tx)
                return
            self._forget(existing, tx)
        es = start.executionStarted
        now = ts_ns(start.timestamp)
        child = Instance(iid=child_id, seq=self._next_seq(tx), name=es.name,
                         generation=(existing.generation + 1) if existing is not None else 0,
                         execution_id=es.workflowInstance.executionId.value, created_ns=now,
                         last_updated_ns=now, parent=parent_ref)
        self._instances[child_id] = child
        visible = 0
        if detached and es.HasField("scheduledStartTimestamp"):
            visible = min(max(0, ts_ns(es.scheduledStartTimestamp)), NEVER_NS)
        self._add_inbox(child, start, tx, visible_at=visible)
        tx.instances[child_id] = child.meta()
        self._maybe_queue(child)
        self._notify(child_id)

    def _continue_as_new(self, inst: Instance, can: tuple[str | None, list[pb.HistoryEvent]], tx: Tx) -> None:
        """R2.10 / R3.10: a new generation; old timers and activities are forgotten."""
        new_input, carry = can
        old_start = inst.start_event()
        tx.history_clear.add(inst.iid)
        for entry in list(inst.inbox):
            # Keep events that arrived during the turn (not timers of the old generation).
            if entry.event.HasField("timerFired"):
                inst.inbox.remove(entry)
                tx.inbox_delete.append((inst.iid, entry.seq))
        for task_id in list(inst.activities):
            tx.activity_delete.append((inst.iid, task_id))
        inst.activities.clear()
        inst.history = []
        inst.started = False
        inst.completed = None
        inst.suspended = False
        inst.resolved = set()
        inst.opened = {"task": set(), "timer": set(), "child": set()}
        inst.timer_event_names = {}
        inst.children = []
        inst.patches = []
        inst.generation += 1
        inst.continuing = True
        now = self.now()
        start = pb.HistoryEvent(eventId=-1, timestamp=ts(now))
        es = start.executionStarted
        es.name = inst.name
        if new_input is not None:
            es.input.value = new_input
        es.workflowInstance.instanceId = inst.iid
        inst.execution_id = uuid.uuid4().hex
        es.workflowInstance.executionId.value = inst.execution_id
        if old_start is not None and old_start.executionStarted.HasField("parentInstance"):
            es.parentInstance.CopyFrom(old_start.executionStarted.parentInstance)
        inst.created_ns = now
        # Start event and carry-over events go first, ahead of anything still queued.
        rest = list(inst.inbox)
        for entry in rest:
            tx.inbox_delete.append((inst.iid, entry.seq))
        inst.inbox = []
        self._add_inbox(inst, start, tx)
        for ev in carry:
            self._add_inbox(inst, ev, tx)
        for entry in rest:
            self._add_inbox(inst, entry.event, tx, visible_at=entry.visible_at)

    def _finish(self, inst: Instance, tx: Tx) -> None:
        """Terminal: drop timers and pending activities (R6.2 DAPR) and tell the parent (R3.6)."""
        for entry in list(inst.inbox):
            if entry.event.HasField("timerFired"):
                inst.inbox.remove(entry)
                tx.inbox_delete.append((inst.iid, entry.seq))
        for task_id in list(inst.activities):
            tx.activity_delete.append((inst.iid, task_id))
        inst.activities.clear()
        if not inst.parent:
            return
        parent = self._instances.get(inst.parent["iid"])
        if parent is None or parent.terminal or parent.execution_id != inst.parent.get("exec_id"):
            return
        assert inst.completed is not None
        done = inst.completed.executionCompleted
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now()))
        if done.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED:
            ev.childWorkflowInstanceCompleted.taskScheduledId = inst.parent["task_id"]
            if done.HasField("result"):
                ev.childWorkflowInstanceCompleted.result.CopyFrom(done.result)
        else:
            ev.childWorkflowInstanceFailed.taskScheduledId = inst.parent["task_id"]
            if done.HasField("failureDetails"):
                ev.childWorkflowInstanceFailed.failureDetails.CopyFrom(done.failureDetails)
        self._add_inbox(parent, ev, tx)
        tx.instances[parent.iid] = parent.meta()
        self._maybe_queue(parent)

    # ----------------------------------------------------------------- vectors

    def inject_turn(self, *, instance_id: str, past: Iterable[pb.HistoryEvent], new: Iterable[pb.HistoryEvent],
                    timeout: float = 30.0) -> pb.WorkflowResponse | None:
        """Send a hand-made turn to the next connected worker and return its answer, applying nothing.

        This is how turn-level vectors reach a worker under test: the history is the
        vector's, not an instance's, and the answer is compared, not committed.
        """
        token = "vector-" + uuid.uuid4().hex
        item = pb.WorkItem(completionToken=token)
        req = item.workflowRequest
        req.instanceId = instance_id
        req.pastEvents.extend(past)
        req.newEvents.extend(new)
        for ev in list(req.newEvents) + list(req.pastEvents):
            if ev.HasField("executionStarted"):
                req.executionId.CopyFrom(ev.executionStarted.workflowInstance.executionId)
                break
        vec = _Vector(token=token, instance_id=instance_id, item=item)
        with self._lock:
            self._check_open()
            self._vectors[token] = vec
            self._ready.append(("vec", token, 0))
            self._work.notify()
        try:
            vec.done.wait(timeout)
            return vec.response
        finally:
            with self._lock:
                self._vectors.pop(token, None)

    def _vector_for(self, resp: pb.WorkflowResponse) -> "_Vector | None":
        if resp.completionToken:
            return self._vectors.get(resp.completionToken)
        # Workers without a completion-token field (jsdapr) answer with an empty token.
        return next((v for v in self._vectors.values() if v.instance_id == resp.instanceId and v.stream is not None),
                    None)

    # ----------------------------------------------------------------- time

    def _tick_loop(self) -> None:
        with self._lock:
            idle_since: int | None = None
            while not self._closed:
                now = self.clock.now_ns()
                self._run_due(now)
                wait = 1.0
                if self._due:
                    wait = max(0.0, min(wait, (self._due[0][0] - now) / 1e9))
                if self.clock.virtual and self._due and self._idle():
                    real = time.monotonic_ns()
                    if idle_since is None:
                        idle_since = real
                    elif real - idle_since >= _IDLE_JUMP_NS:
                        target = self._due[0][0]
                        if target > now:
                            log.info("virtual clock jumps %.3fs ahead", (target - now) / 1e9)
                            self.clock.advance_to(target)
                        idle_since = None
                        continue
                    wait = min(wait, 0.02)
                else:
                    idle_since = None
                self._tick.wait(wait)

    def _idle(self) -> bool:
        """Nothing in flight: no queued work, no turn or activity out on a stream."""
        if self._ready:
            return False
        return not any(stream.out for stream in self._streams.values())

    def _run_due(self, now: int) -> None:
        while self._due and self._due[0][0] <= now:
            _, iid = heapq.heappop(self._due)
            inst = self._instances.get(iid)
            if inst is None:
                continue
            self._maybe_queue(inst)
            if self.config.activity_lease_s:
                lease = int(self.config.activity_lease_s * 1e9)
                for act in inst.activities.values():
                    if act.stream is not None and act.dispatched_at is not None and act.dispatched_at + lease <= now:
                        # R4.6 (b): lease expired: dispatch again with a new token; the old run is a zombie.
                        stream = self._streams.get(act.stream)
                        if stream is not None:
                            stream.out.discard(("act", iid, act.task_id))
                        self.counters.redispatched_activities += 1
                        log.info("activity lease expired for %s/%s; dispatching again", iid, act.task_id)
                        self._queue_activity(inst, act)

    def advance_clock(self, seconds: float) -> None:
        """Move a virtual clock forward (harness control)."""
        with self._lock:
            if not self.clock.virtual:
                raise errors.FailedPrecondition("the sidecar runs on the real clock; start it with --clock virtual")
            self.clock.advance_to(self.clock.now_ns() + int(seconds * 1e9))
            self._tick.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise errors.ShuttingDown("shutting down")

    # ----------------------------------------------------------------- introspection

    def instance_ids(self) -> Iterable[str]:
        with self._lock:
            return list(self._instances)


@dataclass
class _Vector:
    token: str
    instance_id: str
    item: pb.WorkItem
    stream: int | None = None
    response: pb.WorkflowResponse | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _keep_volatile(old: Instance, new: Instance) -> None:
    """After a rollback: what is out on worker streams stays out (its answer is still expected)."""
    new.turn, new.queued, new.retries, new.retry_at = old.turn, old.queued, old.retries, old.retry_at
    new.parked = new.parked or old.parked
    for task_id, act in new.activities.items():
        was = old.activities.get(task_id)
        if was is not None and was.gen == act.gen:
            act.token, act.stream, act.dispatched_at, act.queued, act.dispatches = (
                was.token, was.stream, was.dispatched_at, was.queued, was.dispatches)


_RERUNNABLE = {"taskScheduled", "timerCreated", "childWorkflowInstanceCreated"}


def _validate_instance_id(iid: str) -> None:
    if len(iid) > MAX_INSTANCE_ID:
        raise errors.InvalidArgument(f"instance id is {len(iid)} characters long; the limit is {MAX_INSTANCE_ID}")
    bad = [c for c in iid if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise errors.InvalidArgument(f"instance id {iid!r} contains control characters; use printable characters")
