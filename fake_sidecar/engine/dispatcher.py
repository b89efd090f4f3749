"""Handing work to worker streams: the ready queue, the streams, completion tokens and leases.

A work item is built when a stream takes it (`take`), so a turn carries every inbox event that
arrived until then. What is out on a stream is redelivered when the stream closes (R4.6 a, R5.3)
or, for an activity, when its lease expires (R4.6 b).

Work that belongs to no instance (the harness's test vectors, vectors.py) joins the same queue as
a `ForeignWork`, so it is served in arrival order with the rest; the dispatcher only calls it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from typing import Callable, Protocol

from taskhub_core.delivery import deliver
from taskhub_core.delivery import visible as taken
from taskhub_core.incidents import Incident, IncidentKind
from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.crossapp import activity_route, stamp_start
from fake_sidecar.engine.config import Counters, EngineConfig, TaskExecutionIdMode
from fake_sidecar.engine.incidents import IncidentLog
from fake_sidecar.engine.instances import InstanceTable
from fake_sidecar.engine.model import (
    NEVER_NS, InboxEntry, Instance, PendingActivity, Stream, Turn, WorkKind, WorkRef,
)
from fake_sidecar.engine.policy import EnginePolicy
from fake_sidecar.engine.refusals import RefusalTracker
from fake_sidecar.engine.store import StoreError
from fake_sidecar.engine.ticker import Ticker
from fake_sidecar.engine.turns import payload_size

log = logging.getLogger("fake_sidecar.engine")


class ForeignWork(Protocol):
    """A queued work item that is no instance's: `claim` returns it for stream `sid`, or None if gone."""

    def claim(self, sid: int) -> pb.WorkItem | None: ...


class Dispatcher:
    """Queues, streams, tokens and leases; every method is called under the engine lock."""

    def __init__(self, *, lock: threading.RLock, table: InstanceTable, ticker: Ticker, policy: EnginePolicy,
                 config: EngineConfig, counters: Counters, closed: Callable[[], bool],
                 incidents: IncidentLog | None = None) -> None:
        self._work = threading.Condition(lock)
        self._table = table
        self._ticker = ticker
        self._policy = policy
        self._config = config
        self._counters = counters
        self.incidents = incidents if incidents is not None else IncidentLog()
        # One queue per app (R11.1): a stream takes only its app's work. "" is the default app, the
        # only one unless the engine hosts several.
        self._ready: dict[str, deque[WorkRef | ForeignWork]] = {"": deque()}
        self._multi = len(config.apps) > 1
        self._streams: dict[int, Stream] = {}
        self._next_sid = 1
        self.asleep = 0  # work items out whose holder sleeps on engine time (Engine.pass_time)
        self._refusals = RefusalTracker()
        self._closed = closed
        # R3.17: what a turn of a finished instance does with its visible events (completions.py).
        self.on_terminal: Callable[[Instance, list[InboxEntry]], None] = lambda inst, visible: None

    # ------------------------------------------------------------- queueing

    def maybe_queue(self, inst: Instance) -> None:
        """Queue a turn when the instance has visible inbox events and nothing in flight."""
        if inst.turn is not None or inst.queued or inst.parked:
            return
        now = self._ticker.clock.now_ns()
        if inst.retry_at > now:
            self._ticker.wake_at(inst.retry_at, inst.iid)
            return
        if any(e.visible_at <= now and not self._policy.holds(inst=inst, event=e.event) for e in inst.inbox) \
                and _startable(inst, now):
            inst.queued = True
            self._push(inst.app, WorkRef.turn(inst.iid))

    def queue_activity(self, inst: Instance, act: PendingActivity) -> None:
        if act.queued:
            return
        act.queued = True
        act.stream = None
        if act.app is None:
            act.app, act.router = activity_route(inst, act.task_id, self._config)
        self._push(act.app, WorkRef.activity(inst.iid, act.task_id))

    def queue_foreign(self, work: ForeignWork) -> None:
        self._push("", work)

    def _push(self, app: str, ref: WorkRef | ForeignWork) -> None:
        """Queue `ref` for the workers of `app`: an app nobody serves yet keeps it until one connects
        (R11.5: daprd retries the dispatch until the target app is there)."""
        self._ready.setdefault(app, deque()).append(ref)
        if self._multi:
            self._work.notify_all()  # the one woken must be a stream of that app
        else:
            self._work.notify()

    def requeue(self, inst: Instance) -> None:
        """Queue what a just-restored instance has pending: activities, due inbox events, a turn."""
        for act in inst.activities.values():
            if act.stream is None:
                self.queue_activity(inst, act)
        for entry in inst.inbox:
            if entry.visible_at < NEVER_NS:
                self._ticker.wake_at(entry.visible_at, inst.iid)
        if inst.stalled is not None:
            inst.parked = True
        try:
            self.maybe_queue(inst)
        except StoreError as exc:  # a damaged history: the instance waits, the others are served
            log.error("%s", exc.message)

    def idle(self) -> bool:
        """Nothing in flight: no queued work, no turn or activity out on a stream but those asleep on
        engine time (`Engine.pass_time`)."""
        if any(self._ready.values()):
            return False
        return sum(len(stream.out) for stream in self._streams.values()) <= self.asleep

    def wake_all(self) -> None:
        self._work.notify_all()

    # ------------------------------------------------------------- streams

    def open_stream(self, *, stateful: bool, app: str = "") -> int:
        sid = self._next_sid
        self._next_sid += 1
        self._streams[sid] = Stream(sid=sid, stateful=stateful and self._config.stateful_history, app=app)
        # A (re)connecting worker may carry fixed code: retry stalled instances (§7, R7.4).
        for inst in self._table.all():
            if inst.parked:
                inst.parked = False
                self.maybe_queue(inst)
        return sid

    def close_stream(self, sid: int) -> None:
        """Redeliver everything that was out on the stream (R4.6 a, R5.3)."""
        stream = self._streams.pop(sid, None)
        if stream is None:
            return
        for ref in stream.out:
            inst = self._table.find(ref.iid)
            if inst is not None:
                self._redeliver(inst, ref, sid)
        self._work.notify_all()

    def connected_streams(self) -> int:
        return len(self._streams)

    def serves(self, app: str) -> bool:
        """Whether a worker of `app` is connected (daprd registers an app's workflow actor types only
        while one is, pkg/runtime/wfengine/wfengine.go:197-232)."""
        return any(stream.app == app for stream in self._streams.values())

    def _redeliver(self, inst: Instance, ref: WorkRef, sid: int) -> None:
        if ref.kind is WorkKind.TURN:
            if inst.turn is None or inst.turn.stream != sid:
                return
            inst.turn = None
            if not self._policy.redelivers(ref=ref):
                return
            self._counters.abandoned_turns += 1
            self._refusals.lost(ref)
            self.incidents.record(Incident(kind=IncidentKind.REDELIVERED, instance=inst.iid,
                                           text=f"the turn was out on stream {sid}, which closed unanswered; "
                                                "delivered again"))
            self.maybe_queue(inst)
        else:
            act = inst.activities.get(ref.task_id)
            if act is not None and act.stream == sid and self._policy.redelivers(ref=ref):
                self._counters.redispatched_activities += 1
                self._refusals.lost(ref)
                self.incidents.record(Incident(kind=IncidentKind.REDELIVERED, instance=inst.iid,
                                               text=f"activity {act.task_id} was out on stream {sid}, which closed "
                                                    "unanswered; dispatched again"))
                self.queue_activity(inst, act)

    def settled(self, ref: WorkRef, sid: int | None) -> None:
        """The answer to `ref` arrived: it is no longer out on stream `sid`, nor a refused item."""
        self._refusals.answered(ref)
        stream = self._streams.get(sid) if sid is not None else None
        if stream is not None:
            stream.out.discard(ref)
        if self._ticker.clock.virtual and self.idle():
            self._ticker.wake_all()  # a virtual clock may jump now, not at the ticker's next look
        if self._config.max_concurrent_activities or self._config.max_concurrent_workflows:
            self._work.notify_all()  # work held back by a concurrency limit may go now

    # ------------------------------------------------------------- tokens

    def token_ok(self, current: str | None, sent: str) -> bool:
        return self._policy.token_ok(current=current, sent=sent, strict=self._config.strict_tokens)

    def log_refused_token(self, what: str, sent: str, *, instance: str) -> None:
        self.incidents.record(Incident(kind=IncidentKind.STALE_TOKEN, instance=instance,
                                       text=f"ignored {what}: " + ("its completion token is not the current "
                                                                   "dispatch's (a zombie's)" if sent else
                                                                   "no completion token (--strict-tokens)")))
        if sent:
            log.info("ignored stale %s (zombie token)", what)
        else:
            log.warning("ignored %s without a completionToken (--strict-tokens); a worker that lacks the "
                        "field needs a sidecar without --strict-tokens", what)

    # ------------------------------------------------------------- taking work

    def take(self, sid: int, *, timeout: float) -> pb.WorkItem | None:
        """The next work item for stream `sid`, or None after `timeout` seconds."""
        if sid not in self._streams:
            raise errors.ShuttingDown("work item stream closed")
        item = self._take_ready(sid)
        if item is None:
            self._work.wait(timeout)
            if self._closed():
                raise errors.ShuttingDown("shutting down")
            if sid not in self._streams:
                raise errors.ShuttingDown("work item stream closed")
            item = self._take_ready(sid)
        return item

    def _in_flight(self, kind: WorkKind) -> int:
        return sum(1 for stream in self._streams.values() for ref in stream.out if ref.kind is kind)

    def _at_limit(self, kind: WorkKind) -> bool:
        """The engine's concurrency limit of `kind` is reached (daprd maxConcurrent*Invocations)."""
        limit = (self._config.max_concurrent_activities if kind is WorkKind.ACTIVITY
                 else self._config.max_concurrent_workflows)
        return limit is not None and self._in_flight(kind) >= limit

    def _take_ready(self, sid: int) -> pb.WorkItem | None:
        ready = self._ready.get(self._streams[sid].app)
        if not ready:
            return None
        held: list[WorkRef] = []  # over a concurrency limit: kept in order for a later take
        try:
            return self._take_within_limits(sid, ready, held)
        finally:
            ready.extendleft(reversed(held))

    def _take_within_limits(self, sid: int, ready: deque[WorkRef | ForeignWork],
                            held: list[WorkRef]) -> pb.WorkItem | None:
        while ready:
            ref = ready.popleft()
            if not isinstance(ref, WorkRef):
                item = ref.claim(sid)
                if item is not None:
                    return item
                continue
            inst = self._table.find(ref.iid)
            if inst is None:
                continue
            if self._at_limit(ref.kind):
                held.append(ref)
                continue
            if ref.kind is WorkKind.ACTIVITY:
                act = inst.activities.get(ref.task_id)
                if act is None or not act.queued:
                    continue
                act.queued = False
                if self._refused(inst, ref, act.request.ByteSize()):
                    continue
                return self._dispatch_activity(sid, inst, act)
            if not inst.queued:
                continue
            inst.queued = False
            item = self._dispatch_turn(sid, inst)
            if item is not None:
                return item
        return None

    def _refused(self, inst: Instance, ref: WorkRef, size: int) -> bool:
        """Hold back a big item that its streams kept dropping unanswered (see refusals.py)."""
        held = self._refusals.dispatching(ref, size, limit=self._config.max_message_bytes)
        if held is not None:
            self._table.stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, held))
        return held is not None

    def _dispatch_activity(self, sid: int, inst: Instance, act: PendingActivity) -> pb.WorkItem:
        act.token = uuid.uuid4().hex
        act.stream = sid
        act.dispatched_at = self._ticker.clock.now_ns()
        act.dispatches += 1
        if self._config.task_execution_id is TaskExecutionIdMode.SPEC:
            # Kept on the pending activity, so the completion of this attempt records it (a stale
            # answer of an earlier attempt is refused by its token).
            act.request.taskExecutionId = str(uuid.uuid4())
        self._streams[sid].out.add(WorkRef.activity(inst.iid, act.task_id))
        if self._config.activity_lease_s:
            self._ticker.wake_at(act.dispatched_at + int(self._config.activity_lease_s * 1e9), inst.iid)
        item = pb.WorkItem(completionToken=act.token)
        item.activityRequest.CopyFrom(act.request)
        return item

    def _dispatch_turn(self, sid: int, inst: Instance) -> pb.WorkItem | None:
        now = self._ticker.clock.now_ns()
        visible = [e for e in taken(inst.inbox, now_ns=now) if not self._policy.holds(inst=inst, event=e.event)]
        if not visible or not _startable(inst, now):
            return None
        if inst.terminal:
            self.on_terminal(inst, visible)
            return None
        payload = self._config.payload_limit(inst.app)  # the limit of the app that runs it (R11.15)
        oversize = payload.workflow_oversize(payload_size(inst)) if payload else None
        if oversize is not None:
            self._table.stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
            return None
        # The one rule of what a turn delivers (taskhub_core.delivery): each TimerFired is stamped
        # when it fires, i.e. now, before the turn's WorkflowStarted (R2.6), on the strictly
        # increasing clock.
        turn = deliver(visible, now_ns=now, clock=self._ticker.now, started=inst.started, resolved=inst.resolved,
                       is_duplicate=lambda key, seen: self._policy.is_duplicate(inst=inst, key=key, seen=seen))
        self._counters.duplicate_dropped += turn.duplicates
        if turn.duplicates:
            self.incidents.record(Incident(kind=IncidentKind.DUPLICATE_DROPPED, instance=inst.iid,
                                           text=f"dropped {turn.duplicates} resolution(s) already in history or "
                                                "delivered twice (R2.7)"))
        delivered, consumed = list(turn.new_events), list(turn.consumed)
        stamp_start(self._config, inst, delivered)  # R11.3: the worker sees the router on ExecutionStarted
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
        if inst.incoming:
            req.propagatedHistory.ParseFromString(inst.incoming)  # R11.8: with every turn (executor.go:129-137)
        # The message as sent (framing included) must fit too, or the worker refuses it on every dispatch.
        size = req.ByteSize() + len(token) + 8
        oversize = payload.workflow_oversize(size) if payload else None
        if oversize is not None:
            self._table.stall(inst, (pb.PAYLOAD_SIZE_EXCEEDED, oversize))
            return None
        ref = WorkRef.turn(inst.iid)
        if self._refused(inst, ref, size):
            return None
        if stream.stateful:
            stream.warm[inst.iid] = (inst.execution_id, len(past))
        inst.turn = Turn(token=token, stream=sid, new_events=delivered, consumed=consumed, past_len=len(past))
        stream.out.add(ref)
        item = pb.WorkItem(completionToken=token)
        item.workflowRequest.CopyFrom(req)
        return item

    # ------------------------------------------------------------- leases

    def expire_leases(self, inst: Instance, now: int) -> None:
        """R4.6 (b): an activity out longer than its lease is dispatched again with a new token."""
        if not self._config.activity_lease_s:
            return
        lease = int(self._config.activity_lease_s * 1e9)
        for act in inst.activities.values():
            if act.stream is not None and act.dispatched_at is not None and act.dispatched_at + lease <= now:
                stream = self._streams.get(act.stream)
                if stream is not None:
                    stream.out.discard(WorkRef.activity(inst.iid, act.task_id))
                self._counters.redispatched_activities += 1
                log.info("activity lease expired for %s/%s; dispatching again", inst.iid, act.task_id)
                self.incidents.record(Incident(kind=IncidentKind.REDELIVERED, instance=inst.iid,
                                               text=f"activity {act.task_id}'s lease ran out unanswered; "
                                                    "dispatched again with a new token"))
                self.queue_activity(inst, act)


def _startable(inst: Instance, now: int) -> bool:
    """No turn before the instance's ExecutionStarted is due: events wait for a scheduled start."""
    # The inbox decides first: reading `started` makes a cold instance read its history.
    starts = [e for e in inst.inbox if e.event.HasField("executionStarted")]
    if not starts or any(e.visible_at <= now for e in starts):
        return True
    return inst.started or inst.terminal
