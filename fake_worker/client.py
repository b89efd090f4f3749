"""The worker's connection to a sidecar: Hello, the GetWorkItems stream, keepalive, reconnect, Complete*.

Work items are handled on a thread pool: workflow turns through the pure
executor, activities through the built-in activity runner. An optional
adversary may change what is sent, for testing engines.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from taskhub_wire import pb
from taskhub_wire.kinds import EventKind
from taskhub_wire.rpc import TaskHubClient

from taskhub_wire.limits import DEFAULT_MAX_MESSAGE_BYTES
from fake_worker.activities import ActivityFailure, ActivityRunner
from fake_worker.adversary import Adversary, Send
from fake_worker.history_cache import HistoryCache
from taskhub_programs import Bundle
from fake_worker.replay import TurnResult, execute

log = logging.getLogger("fake_worker")

# A completion that failed with one of these may not have reached the sidecar, or was refused for
# now (RESOURCE_EXHAUSTED: the sidecar's disk is full): it is kept and sent again after reconnecting
# and every few seconds (the engine accepts it, or ignores it by its token if it moved on).
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
                        grpc.StatusCode.RESOURCE_EXHAUSTED})
_RETRY_S = (1.0, 5.0)  # first and longest pause between attempts to send kept completions


class ConnectError(Exception):
    """The sidecar could not be reached in time."""


@dataclass(frozen=True)
class WorkerOptions:
    sidecar: str
    api_token: str | None = None
    concurrency: int = 8
    complete_rpc: str = "orchestrator"  # or "workflow": CompleteOrchestratorTask vs CompleteWorkflowTask
    connect_timeout: float = 10.0
    keepalive_interval: float = 30.0
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # as the sidecar's, so it can take what it is sent
    # WORKER_CAPABILITY_STATEFUL_HISTORY: announce it and take deltas (history_cache.py); at most
    # history_cache_instances instances are kept per stream (None: no limit, 0: every delta misses).
    stateful_history: bool = False
    history_cache_instances: int | None = None


@dataclass
class Worker:
    bundle: Bundle
    options: WorkerOptions
    activities: ActivityRunner = field(default_factory=ActivityRunner)
    adversary: Adversary = field(default_factory=Adversary)
    on_connect: "callable | None" = None  # type: ignore[valid-type]

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._call: grpc.Future | None = None
        self._lock = threading.Lock()
        self._undelivered: deque[tuple[str, Message]] = deque()
        self.connected_once = threading.Event()
        self.history = HistoryCache(max_instances=self.options.history_cache_instances)  # per stream

    @property
    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return (("dapr-api-token", self.options.api_token),) if self.options.api_token else ()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def run(self) -> None:
        """Serve until stop(); raises ConnectError if the first connection fails within connect_timeout.

        One channel for the whole run: work items still being handled when a stream breaks answer
        on it after the reconnect. It is closed only once no pool thread can use it any more.
        """
        pool = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="worker-item")
        limit = self.options.max_message_bytes
        channel = grpc.insecure_channel(self.options.sidecar, options=[
            ("grpc.keepalive_time_ms", 30000), ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit),
            # Reconnect soon after a sidecar restart, not after gRPC's backoff of up to 2 minutes.
            ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000)])
        client = TaskHubClient(channel, metadata=self._metadata)
        first_deadline = time.monotonic() + self.options.connect_timeout
        backoff = 0.05
        threading.Thread(target=self._retry_kept, args=(client,), name="worker-retry", daemon=True).start()
        try:
            while not self._stop.is_set():
                try:
                    wait = 5.0 if self.connected_once.is_set() else max(0.05, min(5.0, first_deadline - time.monotonic()))
                    client.call("Hello", empty_pb2.Empty(), timeout=wait, wait_for_ready=True)
                except grpc.RpcError as exc:
                    if not self.connected_once.is_set() and time.monotonic() >= first_deadline:
                        raise ConnectError(
                            f"cannot reach the sidecar at {self.options.sidecar} within "
                            f"{self.options.connect_timeout:g}s: {exc.code().name}: {exc.details()}") from None
                    if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                        raise ConnectError(f"the sidecar refused the API token: {exc.details()}") from None
                    self._stop.wait(backoff)
                    backoff = min(2.0, backoff * 2)
                    continue
                backoff = 0.05
                if self._redeliver(client):
                    self._serve(client, pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            channel.close()
            if self._undelivered:
                log.warning("stopped with %d result(s) the sidecar did not receive; it will dispatch them again",
                            len(self._undelivered))

    def _serve(self, client: TaskHubClient, pool: ThreadPoolExecutor) -> None:
        request = pb.GetWorkItemsRequest()
        if self.options.stateful_history:
            request.capabilities.append(pb.WORKER_CAPABILITY_STATEFUL_HISTORY)
            # The engine forgets what it sent when the stream ends, so does the worker (R5.7).
            self.history = HistoryCache(max_instances=self.options.history_cache_instances)
        call = client.stream("GetWorkItems", request)
        with self._lock:
            self._call = call
            if self._stop.is_set():  # stop() came between the Hello and this stream: it cancelled nothing
                call.cancel()
        if not self.connected_once.is_set():
            self.connected_once.set()
            if self.on_connect is not None:
                self.on_connect()
        keepalive = threading.Thread(target=self._keepalive, args=(client, call), daemon=True)
        keepalive.start()
        try:
            for item in call:
                if self._undelivered:
                    self._redeliver(client)
                self.adversary.seen(item)
                if self.adversary.disconnect_after(item):
                    log.warning("adversary: disconnecting right after a dispatch")
                    call.cancel()
                    break
                pool.submit(self._handle, client, call, item)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                log.warning("work item stream ended: %s; a work item may exceed --max-message-bytes %d; reconnecting",
                            exc.details(), self.options.max_message_bytes)
            elif not self._stop.is_set() and exc.code() != grpc.StatusCode.CANCELLED:
                log.info("work item stream ended: %s %s; reconnecting", exc.code().name, exc.details())
        finally:
            with self._lock:
                self._call = None

    def _retry_kept(self, client: TaskHubClient) -> None:
        """Send kept completions again while connected, backing off while the sidecar refuses them."""
        pause = _RETRY_S[0]
        while not self._stop.wait(pause):
            if not self._undelivered or self._call is None:
                pause = _RETRY_S[0]
                continue
            try:
                ok = self._redeliver(client)
            except ValueError:  # the run ended and closed the channel
                return
            pause = _RETRY_S[0] if ok else min(_RETRY_S[1], pause * 2)

    def _keepalive(self, client: TaskHubClient, call: grpc.Future) -> None:
        while not self._stop.wait(self.options.keepalive_interval):
            if call.done():
                return
            try:
                client.call("Hello", empty_pb2.Empty(), timeout=10)
            except (grpc.RpcError, ValueError):  # ValueError: the run ended and closed the channel
                pass

    def _handle(self, client: TaskHubClient, call: grpc.Future, item: pb.WorkItem) -> None:
        try:
            if item.HasField("workflowRequest"):
                self._turn(client, call, item)
            elif item.HasField("activityRequest"):
                self._activity(client, call, item)
            else:
                log.warning("ignored a work item with neither a workflow nor an activity request (token %r, "
                            "%d bytes); is the sidecar newer than this worker?", item.completionToken, item.ByteSize())
        except grpc.RpcError as exc:
            log.warning("completion failed (%s %s); the sidecar will re-dispatch", exc.code().name, exc.details())
        except Exception:  # noqa: BLE001 - a bad item must not kill the worker
            log.exception("failed to handle a work item")

    def _turn(self, client: TaskHubClient, call: grpc.Future, item: pb.WorkItem) -> None:
        req = item.workflowRequest
        if self.options.stateful_history:
            try:
                req = self._full_history(client, req)
            except grpc.RpcError as exc:
                # No history, no answer: the engine redelivers a turn in full only on a new stream.
                log.warning("workflow %s: cannot read its history (%s %s); reconnecting for a full send",
                            req.instanceId, exc.code().name, exc.details())
                call.cancel()
                return
        result = self.answer(req)
        for note in result.notes:
            log.warning("workflow %s: %s", req.instanceId, note)
        resp = result.response(instance_id=req.instanceId, completion_token=item.completionToken)
        rpc = "CompleteWorkflowTask" if self.options.complete_rpc == "workflow" else "CompleteOrchestratorTask"
        for send in self.adversary.turn(item, resp):
            self._send(client, rpc, send)

    def _full_history(self, client: TaskHubClient, req: pb.WorkflowRequest) -> pb.WorkflowRequest:
        """The request with its whole pastEvents: a delta joined to the cached prefix, or read on a miss."""

        def fetch(iid: str) -> list[pb.HistoryEvent]:
            log.info("workflow %s: cached history missed; reading GetInstanceHistory", iid)
            resp = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid), timeout=30)
            return list(resp.events)

        resolved = self.history.resolve(req, fetch=fetch)
        if resolved.source == "full":
            return req
        full = pb.WorkflowRequest()
        full.CopyFrom(req)
        full.ClearField("cachedHistory")
        del full.pastEvents[:]
        full.pastEvents.extend(resolved.past)
        return full

    def answer(self, req: pb.WorkflowRequest) -> TurnResult:
        """The turn's answer; the harness's tests override it in deliberately broken workers (mutants)."""
        return execute(self.bundle, instance_id=req.instanceId, past=req.pastEvents, new=req.newEvents)

    def _activity(self, client: TaskHubClient, call: grpc.Future, item: pb.WorkItem) -> None:  # noqa: C901
        req = item.activityRequest
        resp = pb.ActivityResponse(instanceId=req.workflowInstance.instanceId, taskId=req.taskId,
                                   completionToken=item.completionToken)
        try:
            arg = _decode(req.input.value) if req.HasField("input") else None
            value = self.activities.run(name=req.name, input=arg,
                                        instance_id=req.workflowInstance.instanceId, task_id=req.taskId,
                                        task_execution_id=req.taskExecutionId,
                                        propagated=propagated_summary(req, events=wants_events(arg)))
            if value is not None:
                resp.result.value = _encode(value)
        except ActivityFailure as exc:
            resp.failureDetails.errorType = exc.error_type
            resp.failureDetails.errorMessage = str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken input fails the activity, it is still answered
            resp.failureDetails.errorType = type(exc).__name__
            resp.failureDetails.errorMessage = str(exc)
        if self.adversary.crash_after_activity(item):
            log.warning("adversary: crashing after running activity %s/%s", req.workflowInstance.instanceId, req.taskId)
            call.cancel()
            return
        for send in self.adversary.activity(item, resp):
            self._send(client, "CompleteActivityTask", send)

    def _send(self, client: TaskHubClient, rpc: str, send: Send) -> None:
        if send.delay:
            time.sleep(send.delay)
        self._deliver(client, rpc, send.message)

    def _deliver(self, client: TaskHubClient, rpc: str, message: Message, *, again: bool = False) -> bool:
        """Send one completion; one that may not have arrived, or was refused for now, is kept."""
        try:
            client.call(rpc, message, timeout=30)
            return True
        except grpc.RpcError as exc:
            if exc.code() not in _TRANSIENT:
                raise
            refused = exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            log.log(logging.WARNING if refused and not again else logging.INFO,
                    "%s was not taken (%s %s); keeping it to send again", rpc, exc.code().name, exc.details())
            self._undelivered.append((rpc, message))
            return False

    def _redeliver(self, client: TaskHubClient) -> bool:
        """Send the kept completions, oldest first; False if the sidecar is gone again."""
        for _ in range(len(self._undelivered)):
            try:
                rpc, message = self._undelivered.popleft()
            except IndexError:
                break
            try:
                if not self._deliver(client, rpc, message, again=True):
                    return False
            except grpc.RpcError as exc:
                log.warning("the sidecar refused a kept %s (%s %s); it will dispatch that work again",
                            rpc, exc.code().name, exc.details())
        return True


def _encode(value: object) -> str:
    return json.dumps(value)


def _decode(text: str) -> object:
    return json.loads(text) if text else None


_SCOPE_NAMES = {pb.HISTORY_PROPAGATION_SCOPE_OWN_HISTORY: "own", pb.HISTORY_PROPAGATION_SCOPE_LINEAGE: "lineage"}


def wants_events(arg: Any) -> bool:
    """`propagated` with input {"events": true} also lists each chunk's events (capability propagated_events)."""
    return isinstance(arg, dict) and arg.get("events") is True


def propagated_summary(req: pb.ActivityRequest, *, events: bool = False) -> Any:
    """The `propagated` built-in's value: which chunks of history the activity received, or None."""
    if not req.HasField("propagatedHistory"):
        return None
    ph = req.propagatedHistory
    chunks = []
    for c in ph.chunks:
        chunk: dict[str, Any] = {"app": c.appId, "instance": c.instanceId, "workflow": c.workflowName}
        if events:
            chunk["events"] = [_event_summary(pb.HistoryEvent.FromString(raw)) for raw in c.rawEvents]
        chunks.append(chunk)
    return {"scope": _SCOPE_NAMES.get(ph.scope, "none"), "chunks": chunks}


def _event_summary(ev: pb.HistoryEvent) -> dict[str, Any]:
    """One propagated event as the `propagated` built-in lists it: its kind, and the name, input,
    result and failure message where the event has them (JSON payloads decoded)."""
    field = ev.WhichOneof("eventType")
    out: dict[str, Any] = {"kind": str(EventKind.from_field(field)) if field else "unknown"}
    if not field:
        return out
    body = getattr(ev, field)
    fields = body.DESCRIPTOR.fields_by_name
    if "name" in fields and body.name:
        out["name"] = body.name
    for key in ("input", "result"):
        if key in fields and body.HasField(key):
            out[key] = _decode(getattr(body, key).value)
    if "failureDetails" in fields and body.HasField("failureDetails"):
        out["error"] = body.failureDetails.errorMessage
    return out
