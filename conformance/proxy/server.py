"""FaultProxy: a protocol-aware gRPC proxy between a worker (or client) and a sidecar.

Every call on every path is forwarded as raw bytes over one upstream channel, with the caller's
metadata and deadline; upstream errors come back with the same code, details and trailing
metadata. Messages of known methods are decoded (only) to record the transcript and to match
fault rules (``rules.py``); what is forwarded is always the original bytes.

Decisions worth knowing (see also the package docstring):

* Unary request faults: ``drop`` answers OK with the default response and never forwards;
  ``duplicate`` forwards, then forwards the same bytes again before answering (the caller gets the
  first answer); ``delay`` waits, then forwards with what is left of the caller's deadline;
  ``replay_later`` holds the request back (the caller gets the default OK answer at once, as if it
  had been delivered) and sends it, with the original metadata, after ``replay_after_s`` or on
  ``replay_pending()``: a message that arrives late, e.g. a completion whose token went stale
  meanwhile (a zombie); with ``forward_now=True`` it is forwarded normally as well, so the later
  copy is a late duplicate. The replay's answer goes to the transcript only;
  ``cut_stream`` cuts the caller's GetWorkItems streams (the ones from the same peer, i.e. the same
  connection; all of them when none is) and fails the request with UNAVAILABLE, unforwarded.
* Unary response faults (upstream has processed the request): ``drop`` fails the call with
  UNAVAILABLE "response dropped by fault proxy"; ``delay`` holds the answer; ``cut_stream`` cuts the
  peer's streams and fails the call with UNAVAILABLE.
* Stream item faults: ``drop`` (never delivered), ``duplicate`` (delivered twice in a row),
  ``delay`` (delivered after delay_s without holding back the items behind it, so it may arrive
  out of order), ``replay_later`` (delivered later on the same stream, if it is still open;
  with ``forward_now`` delivered now and again later), ``cut_stream`` (not delivered; items
  already queued before it are delivered, then the worker's stream fails UNAVAILABLE "cut by
  fault proxy" and the upstream call is cancelled, which makes the sidecar redeliver what was out
  on it).
* GetWorkItems request faults: ``delay`` (open the upstream stream late) and ``cut_stream``.
* The end of a GetWorkItems stream is recorded as a ``response`` entry of rpc GetWorkItems
  (status = the code it ended with), so timelines show when a stream went away.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from conformance.events import TranscriptEntry
from conformance.proxy.describe import summarize, to_dict
from conformance.proxy.routing import WorkItemRouter, completion_key, created_instance_ids, item_instance_id, item_key
from conformance.errors import InputError
from conformance.proxy.rules import FaultRule
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, Kind, Method

log = logging.getLogger("conformance.proxy")

CUT_DETAILS = "cut by fault proxy"
DROPPED_RESPONSE_DETAILS = "response dropped by fault proxy"
STOPPED_DETAILS = "fault proxy stopped"
WORKER_RPCS = frozenset({"Hello", "GetWorkItems", "CompleteActivityTask", "CompleteWorkflowTask",
                         "CompleteOrchestratorTask"})
REPLAY_TIMEOUT_S = 30.0  # deadline of a replayed (zombie) request
_NO_DEADLINE_S = 10 * 365 * 24 * 3600.0  # longer than this left: the caller set no deadline
# Methods that can block upstream until something happens (a worker turn, a status change).
_LONG_WAITS = frozenset({
    "StartInstance", "WaitForInstanceStart", "WaitForInstanceCompletion", "TerminateInstance", "SuspendInstance",
    "ResumeInstance", *(f"{stem}{v}" for stem in ("StartWorkflow", "TerminateWorkflow", "PauseWorkflow",
                                                   "ResumeWorkflow") for v in ("Beta1", "Alpha1"))})
_PATHS: dict[str, Method] = {**TASKHUB.paths, **DAPR_WORKFLOW.paths}
_HOP_HEADERS = frozenset({"user-agent", "content-type", "te", "host", "content-length"})
_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]
_SERVER_OPTIONS = _OPTIONS + [
    # The Dapr SDKs ping every 30 s even when idle (as the reference sidecar allows).
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.so_reuseport", 0),
]
_CHANNEL_OPTIONS = _OPTIONS + [("grpc.enable_http_proxy", 0)]


@dataclass(frozen=True)
class FaultEvent:
    """One firing of a rule (or one ``cut_streams()`` call), for reports."""

    t: float  # seconds since the proxy started or since reset_transcript()
    rule_index: int | None  # index in the current rules; None for cut_streams()
    rule: str  # the rule, described
    action: str
    rpc: str
    direction: str
    summary: str  # the message it fired on
    note: str = ""  # e.g. "replayed", "stream closed: replay not delivered"


@dataclass(frozen=True)
class _Fired:
    index: int
    rule: FaultRule

    @property
    def label(self) -> str:
        extra = f" {self.rule.delay_s:g}s" if self.rule.action == "delay" else ""
        return f"{self.rule.action}{extra} (rule {self.index})"


@dataclass(frozen=True)
class _Cut:
    details: str
    fault: str


@dataclass(frozen=True)
class _End:
    code: grpc.StatusCode
    details: str
    trailing: tuple[tuple[str, Any], ...]


_GONE = object()  # the worker went away
_ROUTED_LINGER_S = 60.0  # at most this long an upstream call outlives its worker for routed items


@dataclass(eq=False)
class _Stream:
    peer: str
    call: Any = None
    queue: "queue.SimpleQueue[Any]" = field(default_factory=queue.SimpleQueue)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cut: bool = False
    closed: bool = False
    ended: bool = False  # its end is in the transcript
    # Items read here for another proxy's worker and not yet completed (routing.py): the engine counts
    # them as dispatched on this stream, so ending the upstream call early would have them redelivered.
    routed: set[Any] = field(default_factory=set)
    released: bool = False  # the worker is gone; the upstream call ends once `routed` is empty
    call_ended: bool = False
    lingering: bool = False

    def mark_ended(self) -> bool:
        """True for the first caller only: that one records how the stream ended."""
        with self.lock:
            first, self.ended = not self.ended, True
            return first


@dataclass(eq=False)
class _Held:
    fired: _Fired
    rpc: str
    channel: str
    raw: bytes
    due: float | None  # seconds, None = until replay_pending()
    path: str = ""
    metadata: tuple[tuple[str, Any], ...] = ()
    stream: _Stream | None = None  # set for stream items


def _decode(cls: type[Message] | None, raw: bytes) -> Message | None:
    if cls is None:
        return None
    try:
        return cls.FromString(raw)
    except (DecodeError, ValueError, RuntimeError):
        return None


def _remaining(context: grpc.ServicerContext) -> float | None:
    """The caller's remaining deadline; None when it set none (grpc reports ~infinity then)."""
    left = context.time_remaining()
    return None if left is None or left > _NO_DEADLINE_S else left


def _forwardable(metadata: Any) -> tuple[tuple[str, Any], ...]:
    if not metadata:
        return ()
    out = []
    for item in metadata:
        key, value = item[0], item[1]
        if key.startswith((":", "grpc-")) or key in _HOP_HEADERS:
            continue
        out.append((key, value))
    return tuple(out)


class FaultProxy:
    """A running proxy; use ``FaultProxy.start(upstream=...)``."""

    def __init__(self, *, upstream: str, rules: Sequence[FaultRule], host: str, max_workers: int,
                 t0: float | None = None) -> None:
        self.upstream = upstream
        self.host = host
        self.port = 0
        self._lock = threading.Lock()
        self._t0 = time.monotonic() if t0 is None else t0
        self._transcript: list[TranscriptEntry] = []
        self._faults: list[FaultEvent] = []
        self._gen: tuple[tuple[FaultRule, ...], list[list[int]]] = ((), [])
        self.set_rules(rules)
        self._streams: set[_Stream] = set()
        self._held: list[_Held] = []
        self._timers: set[threading.Timer] = set()
        self._stopping = threading.Event()
        self._router = WorkItemRouter.for_upstream(upstream)
        self._router.attach(self)
        self._routed: list[bytes] = []  # items of our instances that came while no worker stream was open
        self._lingering: list[_Stream] = []  # upstream calls kept open for items routed to another proxy
        self._channel = grpc.insecure_channel(upstream, options=_CHANNEL_OPTIONS)
        self._unary_calls: dict[str, Any] = {}
        self._stream_calls: dict[str, Any] = {}
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        for path, method in _PATHS.items():
            if method.kind is Kind.SERVER_STREAM:
                self._handlers[path] = grpc.unary_stream_rpc_method_handler(self._stream_handler(method))
            else:
                self._handlers[path] = grpc.unary_unary_rpc_method_handler(self._unary_handler(path, method))
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="fault-proxy"),
            options=_SERVER_OPTIONS)
        self._server.add_generic_rpc_handlers([_Generic(self)])

    # ------------------------------------------------------------------ public API

    @classmethod
    def start(cls, *, upstream: str, rules: Sequence[FaultRule] = (), host: str = "127.0.0.1", port: int = 0,
              max_workers: int = 256, t0: float | None = None) -> "FaultProxy":
        """Listen on host:port (0 = any free port) and forward everything to ``upstream`` (host:port).

        ``t0``: a ``time.monotonic()`` value that transcript times count from (default: now), so a
        caller with its own transcript (e.g. the runner's client) can merge both by ``t``."""
        proxy = cls(upstream=upstream, rules=rules, host=host, max_workers=max_workers, t0=t0)
        bound = proxy._server.add_insecure_port(f"{host}:{port}")
        if bound == 0:
            proxy._channel.close()
            proxy._router.release(proxy)
            raise OSError(f"fault proxy cannot listen on {host}:{port}: the address is in use or not available")
        proxy.port = bound
        proxy._server.start()
        return proxy

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving: open worker streams fail UNAVAILABLE, held replays are discarded."""
        self._stopping.set()
        self._router.release(self)
        with self._lock:
            streams = list(self._streams)
            timers = list(self._timers)
            self._timers.clear()
            self._held.clear()
        for timer in timers:
            timer.cancel()
        for st in streams:
            self._cut(st, STOPPED_DETAILS, "proxy stopped")
        self._server.stop(grace).wait(grace + 5)
        self._close_channel_when_idle()

    def _close_channel_when_idle(self) -> None:
        with self._lock:
            lingering = any(not st.call_ended for st in self._lingering)
        if not lingering:
            self._channel.close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def set_rules(self, rules: Sequence[FaultRule]) -> None:
        """Replace the rules; match counts start again from zero (held replays are kept)."""
        rules = tuple(rules)
        bad = [f"rules[{i}]: expected a FaultRule, got {type(r).__name__}" for i, r in enumerate(rules)
               if not isinstance(r, FaultRule)]
        if bad:
            raise InputError(bad, subject="fault rules")
        self._gen = (rules, [[0, 0] for _ in rules])  # per rule: [matches seen, times fired]

    @property
    def rules(self) -> tuple[FaultRule, ...]:
        return self._gen[0]

    def transcript(self) -> list[TranscriptEntry]:
        with self._lock:
            return list(self._transcript)

    def fault_log(self) -> list[FaultEvent]:
        with self._lock:
            return list(self._faults)

    def reset_transcript(self, *, t0: float | None = None) -> None:
        """Forget the transcript and fault log; ``t`` counts from now (or from ``t0``, a monotonic time)."""
        with self._lock:
            self._transcript.clear()
            self._faults.clear()
            self._t0 = time.monotonic() if t0 is None else t0

    def claim(self, instance_id: str) -> None:
        """This proxy's worker serves `instance_id` (and its default-named children): see routing.py."""
        self._router.claim(self, instance_id)

    def accept_routed(self, raw: bytes) -> None:
        """A work item of one of our instances that reached another proxy of the same upstream."""
        with self._lock:
            streams = [st for st in self._streams if not (st.cut or st.closed)]
            if not streams:
                self._routed.append(raw)
                return
        self._on_item(streams[0], raw, routed=True)

    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def cut_streams(self) -> int:
        """Abort every open GetWorkItems stream (UNAVAILABLE) and cancel its upstream call; returns how many."""
        with self._lock:
            streams = [st for st in self._streams if not st.cut]
            self._faults.append(FaultEvent(t=self._now(), rule_index=None, rule="cut_streams()", action="cut_stream",
                                           rpc="GetWorkItems", direction="item",
                                           summary=f"{len(streams)} open stream(s)"))
        for st in streams:
            self._cut(st, CUT_DETAILS, "cut_streams()")
        return len(streams)

    def replay_pending(self) -> int:
        """Send now every copy held by a replay_later rule without replay_after_s; returns how many.

        Unary copies are sent synchronously (when this returns, upstream has answered them)."""
        with self._lock:
            held = [h for h in self._held if h.due is None]
            self._held = [h for h in self._held if h.due is not None]
        for h in held:
            self._replay(h)
        return len(held)

    def pending_replays(self) -> int:
        """How many copies wait for replay_pending() (timed ones are not counted)."""
        with self._lock:
            return len(self._held)

    # ------------------------------------------------------------------ recording and matching

    def _now(self) -> float:
        return round(time.monotonic() - self._t0, 6)

    def _record(self, channel: str, direction: str, rpc: str, summary: str, message: Message | None,
                size: int = 0, *, fault: str | None = None, status: str | None = None) -> None:
        if message is not None:
            body = to_dict(message)
        else:
            body = {"_undecodable_bytes": size} if size else {}
        with self._lock:  # t taken under the lock: the transcript is in time order
            self._transcript.append(TranscriptEntry(t=self._now(), channel=channel, direction=direction, rpc=rpc,
                                                    summary=summary, message=body, fault=fault, status=status))

    def _fire(self, rpc: str, direction: str, message: Message | None, summary: str) -> _Fired | None:
        rules, counts = self._gen
        if not rules:
            return None
        hits = []
        for i, rule in enumerate(rules):
            m = rule.match
            if m.rpc != rpc or m.direction != direction:
                continue
            try:
                ok = m.matches(message)
            except Exception:  # noqa: BLE001 - a rule must never break forwarding
                log.exception("fault rule %d could not be evaluated on %s", i, summary)
                ok = False
            if ok:
                hits.append(i)
        if not hits:
            return None
        fired: _Fired | None = None
        with self._lock:
            for i in hits:
                rule, count = rules[i], counts[i]
                count[0] += 1
                if fired is None and count[0] >= (rule.match.nth or 1) and (rule.times is None or count[1] < rule.times):
                    count[1] += 1
                    fired = _Fired(i, rule)
            if fired is not None:
                self._faults.append(FaultEvent(t=self._now(), rule_index=fired.index, rule=fired.rule.describe(),
                                               action=fired.rule.action, rpc=rpc, direction=direction,
                                               summary=summary))
        return fired

    def _note(self, fired: _Fired, rpc: str, direction: str, summary: str, note: str) -> None:
        with self._lock:
            self._faults.append(FaultEvent(t=self._now(), rule_index=fired.index, rule=fired.rule.describe(),
                                           action=fired.rule.action, rpc=rpc, direction=direction,
                                           summary=summary, note=note))

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _later(self, seconds: float, fn: Callable[[], None]) -> None:
        def run() -> None:
            with self._lock:
                self._timers.discard(timer)
            if not self._stopping.is_set():
                fn()

        timer = threading.Timer(seconds, run)
        timer.daemon = True
        with self._lock:
            if self._stopping.is_set():
                return
            self._timers.add(timer)
        timer.start()

    # ------------------------------------------------------------------ unary

    def _unary_callable(self, path: str) -> Any:
        mc = self._unary_calls.get(path)
        if mc is None:
            mc = self._unary_calls[path] = self._channel.unary_unary(path)
        return mc

    def _call_upstream(self, path: str, raw: bytes, metadata: tuple[tuple[str, Any], ...],
                       timeout: float | None, context: grpc.ServicerContext | None) -> tuple[bytes | None, Any]:
        """(response bytes, call), (None, error-call), or (None, None) when the caller went away.

        Calls that may wait long upstream (and unknown ones) are made as futures so that a caller
        that hangs up cancels them; the rest block in this thread (a future costs a thread spawn)."""
        mc = self._unary_callable(path)
        method = _PATHS.get(path)
        if context is None or (method is not None and method.name not in _LONG_WAITS):
            try:
                return mc.with_call(raw, timeout=timeout, metadata=metadata)
            except grpc.RpcError as err:
                return None, err
        fut = mc.future(raw, timeout=timeout, metadata=metadata)
        if not context.add_callback(fut.cancel):
            fut.cancel()
        try:
            return fut.result(), fut
        except grpc.RpcError as err:
            return None, err
        except grpc.FutureCancelledError:
            return None, None

    def _unary_handler(self, path: str, method: Method | None) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def handler(raw: bytes, context: grpc.ServicerContext) -> bytes:
            return self._unary(path, method, raw, context)

        return handler

    def _unary(self, path: str, method: Method | None, raw: bytes, context: grpc.ServicerContext) -> bytes:
        rpc = method.name if method is not None else path
        channel = "worker" if rpc in WORKER_RPCS else "client"
        msg = _decode(method.request if method else None, raw)
        if method is None:
            summary = f"{path} request: <unknown method, {len(raw)} bytes forwarded raw>"
            fired = None
        else:
            summary = summarize(rpc, "request", msg, len(raw))
            fired = self._fire(rpc, "request", msg, summary)
        self._record(channel, "request", rpc, summary, msg, len(raw), fault=fired.label if fired else None)
        if rpc in ("CompleteOrchestratorTask", "CompleteWorkflowTask"):
            for iid in created_instance_ids(msg):
                self.claim(iid)
        if msg is not None and rpc in ("CompleteOrchestratorTask", "CompleteWorkflowTask", "CompleteActivityTask"):
            self._router.completed(completion_key(msg))
        metadata = _forwardable(context.invocation_metadata())
        action = fired.rule.action if fired else None
        if fired is not None and action == "drop":
            return self._answer_locally(method, channel, fired)
        if fired is not None and action == "cut_stream":
            self._cut_peer(context.peer(), fired.label)
            self._record(channel, "response", rpc, f"{rpc} → UNAVAILABLE: {CUT_DETAILS}", None,
                         fault=fired.label, status="UNAVAILABLE")
            context.abort(grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
        if fired is not None and action == "delay":
            self._sleep(fired.rule.delay_s)
        if fired is not None and action == "replay_later" and not fired.rule.forward_now:
            assert method is not None
            self._hold(_Held(fired=fired, rpc=rpc, channel=channel, raw=raw, due=fired.rule.replay_after_s,
                             path=path, metadata=metadata))
            return self._answer_locally(method, channel, fired)

        resp, call = self._call_upstream(path, raw, metadata, _remaining(context), context)
        if call is None:  # the caller went away; nobody is listening
            self._record(channel, "response", rpc, f"{rpc} → CANCELLED by the caller", None, status="CANCELLED")
            context.abort(grpc.StatusCode.CANCELLED, "cancelled by the caller")

        rfired: _Fired | None = None
        if resp is None:
            code, details = call.code(), call.details() or ""
            self._record(channel, "response", rpc, f"{rpc} → {code.name}: {details}", None, status=code.name)
        else:
            rmsg = _decode(method.response if method else None, resp)
            rsummary = summarize(rpc, "response", rmsg, len(resp)) if method else \
                f"{path} → OK <{len(resp)} bytes>"
            rfired = self._fire(rpc, "response", rmsg, rsummary) if method else None
            self._record(channel, "response", rpc, rsummary, rmsg, len(resp),
                         fault=rfired.label if rfired else None)

        if fired is not None and action == "duplicate":
            self._send_copy(path, raw, metadata, rpc, channel, summary, f"duplicate copy (rule {fired.index})",
                            _remaining(context), context)
        if fired is not None and action == "replay_later":
            self._hold(_Held(fired=fired, rpc=rpc, channel=channel, raw=raw, due=fired.rule.replay_after_s,
                             path=path, metadata=metadata))

        if resp is None:
            trailing = _forwardable(call.trailing_metadata())
            if trailing:
                context.set_trailing_metadata(trailing)
            context.abort(call.code(), call.details() or "")
        if rfired is not None:
            raction = rfired.rule.action
            if raction == "delay":
                self._sleep(rfired.rule.delay_s)
            elif raction == "drop":
                context.abort(grpc.StatusCode.UNAVAILABLE, DROPPED_RESPONSE_DETAILS)
            elif raction == "cut_stream":
                self._cut_peer(context.peer(), rfired.label)
                context.abort(grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
        initial = _forwardable(call.initial_metadata())
        if initial:
            context.send_initial_metadata(initial)
        trailing = _forwardable(call.trailing_metadata())
        if trailing:
            context.set_trailing_metadata(trailing)
        return resp

    def _answer_locally(self, method: Method | None, channel: str, fired: _Fired) -> bytes:
        """The caller's answer for a request that was not forwarded: OK with the default response."""
        assert method is not None  # rules only name known methods
        self._record(channel, "response", method.name,
                     f"{method.name} → OK {method.response.DESCRIPTOR.name} (answered by the fault proxy, not forwarded)",
                     None, fault=fired.label)
        return method.response().SerializeToString()

    def _send_copy(self, path: str, raw: bytes, metadata: tuple[tuple[str, Any], ...], rpc: str, channel: str,
                   summary: str, label: str, timeout: float | None,
                   context: grpc.ServicerContext | None) -> None:
        method = _PATHS.get(path)
        self._record(channel, "request", rpc, summary, _decode(method.request if method else None, raw), len(raw),
                     fault=label)
        resp, call = self._call_upstream(path, raw, metadata, timeout, context)
        if call is None:
            self._record(channel, "response", rpc, f"{rpc} → CANCELLED", None, fault=label, status="CANCELLED")
        elif resp is None:
            code = call.code()
            self._record(channel, "response", rpc, f"{rpc} → {code.name}: {call.details() or ''}", None,
                         fault=label, status=code.name)
        else:
            rmsg = _decode(method.response if method else None, resp)
            self._record(channel, "response", rpc, summarize(rpc, "response", rmsg, len(resp)), rmsg, len(resp),
                         fault=label)

    # ------------------------------------------------------------------ replays

    def _hold(self, held: _Held) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            if held.due is None:
                self._held.append(held)
        if held.due is not None:
            self._later(held.due, lambda: self._replay(held))

    def _replay(self, h: _Held) -> None:
        label = f"replay (rule {h.fired.index})"
        if h.stream is None:
            method = _PATHS.get(h.path)
            msg = _decode(method.request if method else None, h.raw)
            summary = summarize(h.rpc, "request", msg, len(h.raw))
            self._note(h.fired, h.rpc, "request", summary, "replayed")
            self._send_copy(h.path, h.raw, h.metadata, h.rpc, h.channel, summary, label, REPLAY_TIMEOUT_S, None)
            return
        msg = _decode(TASKHUB.methods["GetWorkItems"].response, h.raw)
        summary = summarize("GetWorkItems", "item", msg, len(h.raw))
        if h.stream.closed or h.stream.cut:
            self._note(h.fired, h.rpc, "item", summary, "stream closed: replay not delivered")
            return
        self._note(h.fired, h.rpc, "item", summary, "replayed")
        self._record("worker", "item", "GetWorkItems", summary, msg, len(h.raw), fault=label)
        h.stream.queue.put(h.raw)

    # ------------------------------------------------------------------ streams

    def _stream_callable(self, path: str) -> Any:
        mc = self._stream_calls.get(path)
        if mc is None:
            mc = self._stream_calls[path] = self._channel.unary_stream(path)
        return mc

    def _stream_handler(self, method: Method) -> Callable[[bytes, grpc.ServicerContext], Iterator[bytes]]:
        def handler(raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            return self._stream(method, raw, context)

        return handler

    def _stream(self, method: Method, raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        rpc = method.name
        msg = _decode(method.request, raw)
        summary = summarize(rpc, "request", msg, len(raw))
        fired = self._fire(rpc, "request", msg, summary)
        self._record("worker", "request", rpc, summary, msg, len(raw), fault=fired.label if fired else None)
        if fired is not None and fired.rule.action == "cut_stream":
            self._record_end(rpc, "UNAVAILABLE", CUT_DETAILS, fired.label)
            context.abort(grpc.StatusCode.UNAVAILABLE, CUT_DETAILS)
        if fired is not None and fired.rule.action == "delay":
            self._sleep(fired.rule.delay_s)
        st = _Stream(peer=context.peer())
        st.call = self._stream_callable(method.path)(
            raw, timeout=_remaining(context), metadata=_forwardable(context.invocation_metadata()))
        with self._lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._streams.add(st)
            routed, self._routed = self._routed, []
        for item in routed:
            self._on_item(st, item, routed=True)
        if stopping:
            st.call.cancel()
            context.abort(grpc.StatusCode.UNAVAILABLE, STOPPED_DETAILS)

        def gone() -> None:  # runs when the RPC ends for any reason, also if grpc never resumes us
            with st.lock:
                recorded, st.closed = st.ended, True
                st.ended = True
            with self._lock:
                self._streams.discard(st)
            self._release_upstream(st)
            st.queue.put(_GONE)
            if not recorded:
                self._record_end(rpc, "CANCELLED", "the worker closed the stream", None)

        if not context.add_callback(gone):
            gone()
        pump = threading.Thread(target=self._pump, args=(st,), name=f"fault-proxy-pump {st.peer}", daemon=True)
        pump.start()
        try:
            while True:
                obj = st.queue.get()
                if isinstance(obj, bytes):
                    yield obj
                elif obj is _GONE:
                    return
                elif isinstance(obj, _Cut):
                    if st.mark_ended():
                        self._record_end(rpc, "UNAVAILABLE", obj.details, obj.fault)
                    context.abort(grpc.StatusCode.UNAVAILABLE, obj.details)
                elif isinstance(obj, _End):
                    if st.mark_ended():
                        self._record_end(rpc, obj.code.name, obj.details, None)
                    if obj.trailing:
                        context.set_trailing_metadata(obj.trailing)
                    if obj.code is grpc.StatusCode.OK:
                        return
                    context.abort(obj.code, obj.details)
        finally:
            st.closed = True
            with self._lock:
                self._streams.discard(st)
            self._release_upstream(st)

    def _release_upstream(self, st: _Stream) -> None:
        """End the upstream call, or keep it open while items read on it are out with another proxy's worker."""
        with st.lock:
            st.released = True
            wait = st.lingering = bool(st.routed) or st.lingering
        if not wait:
            st.call.cancel()
            return
        with self._lock:
            if st in self._lingering:
                return
            self._lingering.append(st)
        # Not _later: those timers die with stop(), and this one must also run after it.
        timer = threading.Timer(_ROUTED_LINGER_S, self._end_lingering, args=(st,))
        timer.daemon = True
        timer.start()

    def _routed_done(self, st: _Stream, key: Any) -> None:
        with st.lock:
            st.routed.discard(key)
            end = st.released and not st.routed
        if end:
            self._end_lingering(st)

    def _end_lingering(self, st: _Stream) -> None:
        with st.lock:
            if st.call_ended:
                return
            st.call_ended = True
        st.call.cancel()
        if self._stopping.is_set():
            self._close_channel_when_idle()

    def _record_end(self, rpc: str, code: str, details: str, fault: str | None) -> None:
        self._record("worker", "response", rpc, f"{rpc} stream ended {code}: {details}" if details
                     else f"{rpc} stream ended {code}", None, fault=fault,
                     status=None if code == "OK" else code)

    def _pump(self, st: _Stream) -> None:
        """Reads the upstream stream; each item goes through the rules into the worker's queue."""
        call = st.call
        try:
            for raw in call:
                if st.lingering:  # kept open for routed items: go on passing other proxies theirs
                    self._on_item(st, raw)
                    continue
                if st.cut or st.closed:
                    break
                self._on_item(st, raw)
            end = _End(grpc.StatusCode.OK, "", _forwardable(call.trailing_metadata()))
        except grpc.RpcError as err:
            end = _End(err.code(), err.details() or "", _forwardable(err.trailing_metadata()))
        except Exception as exc:  # noqa: BLE001
            log.exception("fault proxy: reading the upstream stream failed")
            end = _End(grpc.StatusCode.INTERNAL, f"fault proxy: {exc!r}", ())
        st.queue.put(end)

    def _on_item(self, st: _Stream, raw: bytes, *, routed: bool = False) -> None:
        rpc = "GetWorkItems"
        msg = _decode(TASKHUB.methods[rpc].response, raw)
        if not routed:
            owner, retired = self._router.route(item_instance_id(msg))
            if retired:
                return  # an instance of a scenario that has finished: nobody serves it now
            if st.closed and owner is None:
                return  # read on a lingering stream, and nobody serves that instance
            if owner is not None and (owner is not self or st.closed):
                key = item_key(msg)
                with st.lock:
                    st.routed.add(key)
                self._router.dispatched(key, owner, lambda: self._routed_done(st, key))
                owner.accept_routed(raw)
                return
        summary = summarize(rpc, "item", msg, len(raw))
        fired = self._fire(rpc, "item", msg, summary)
        self._record("worker", "item", rpc, summary, msg, len(raw), fault=fired.label if fired else None)
        if fired is None:
            st.queue.put(raw)
            return
        action = fired.rule.action
        if action == "drop":
            return
        if action == "duplicate":
            st.queue.put(raw)
            self._record("worker", "item", rpc, summary, msg, len(raw), fault=f"duplicate copy (rule {fired.index})")
            st.queue.put(raw)
        elif action == "delay":
            def deliver() -> None:
                if not (st.closed or st.cut):
                    st.queue.put(raw)
                else:
                    self._note(fired, rpc, "item", summary, "stream closed: delayed item not delivered")

            self._later(fired.rule.delay_s, deliver)
        elif action == "replay_later":
            if fired.rule.forward_now:
                st.queue.put(raw)
            self._hold(_Held(fired=fired, rpc=rpc, channel="worker", raw=raw, due=fired.rule.replay_after_s,
                             stream=st))
        elif action == "cut_stream":
            self._cut(st, CUT_DETAILS, fired.label)

    def _cut(self, st: _Stream, details: str, fault: str) -> None:
        with st.lock:
            if st.cut:
                return
            st.cut = True
        st.queue.put(_Cut(details, fault))
        if st.call is not None:
            self._release_upstream(st)

    def _cut_peer(self, peer: str, fault: str) -> None:
        with self._lock:
            streams = [st for st in self._streams if not st.cut]
        same = [st for st in streams if st.peer == peer]
        for st in same or streams:
            self._cut(st, CUT_DETAILS, fault)


class _Generic(grpc.GenericRpcHandler):
    def __init__(self, proxy: FaultProxy) -> None:
        self._proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        path = handler_call_details.method
        handler = self._proxy._handlers.get(path)
        if handler is None:  # unknown: forward raw as unary; upstream decides (usually UNIMPLEMENTED)
            handler = grpc.unary_unary_rpc_method_handler(self._proxy._unary_handler(path, None))
        return handler

