"""gRPC edge of the reference engine: decode, call the engine, encode, map errors.

Both services are served through generic handlers on their upstream paths
(`/TaskHubSidecarService/<Method>` and `/dapr.proto.runtime.v1.Dapr/<Method>`);
any other method answers UNIMPLEMENTED. Requests arrive as raw bytes so that a
malformed payload gets INVALID_ARGUMENT with a clear message, not INTERNAL.

The edge is `grpc.aio` on one event-loop thread, so an open GetWorkItems stream costs no
thread (`streams.WorkItemPump`). The engine stays threaded: unary calls run in a thread pool,
and calls that wait for an instance (StartInstance, WaitFor*, Terminate, ...) in a separate
one, so that many waiting callers cannot starve GetInstance; Hello answers on the loop itself.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import DecodeError, Message

from taskhub_core.history import status_name
from taskhub_wire import pb, rt
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, Kind, ServiceTable

from fake_sidecar.engine import Engine, EngineConfig, EngineError, RealClock, TaskExecutionIdMode, VirtualClock
from fake_sidecar.engine.clock import Clock
from fake_sidecar.engine.errors import ShuttingDown
from fake_sidecar.engine.model import InstanceView, ts, ts_ns, wire
from fake_sidecar.engine.policy import REFERENCE_POLICY, EnginePolicy
from fake_sidecar.engine.store import open_store
from taskhub_wire.limits import DEFAULT_MAX_MESSAGE_BYTES
from fake_sidecar.streams import Call, WorkItemPump

log = logging.getLogger("fake_sidecar.server")

TOKEN_HEADER = "dapr-api-token"
_TERMINAL = {pb.ORCHESTRATION_STATUS_COMPLETED, pb.ORCHESTRATION_STATUS_FAILED,
             pb.ORCHESTRATION_STATUS_TERMINATED, pb.ORCHESTRATION_STATUS_CANCELED}


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _deadline_exceeded(what: str) -> _Abort:
    return _Abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                  f"{what} did not happen before the caller's deadline; is a worker connected?")


def _wait(engine: Engine, context: Call, iid: str, pred: Callable[[InstanceView], bool],
          what: str) -> InstanceView:
    view = engine.wait(iid, pred, timeout=context.time_remaining(), is_active=context.is_active)
    if view is None:
        raise _deadline_exceeded(what)
    return view


def _waits(fn: Callable[..., Message]) -> Callable[..., Message]:
    """Marks a handler that blocks until an instance changes: it runs in the pool for waiting calls."""
    fn.waits = True  # type: ignore[attr-defined]
    return fn


def _vector_first(fn: Callable[..., Message]) -> Callable[..., Message]:
    """Marks the answer to a turn: one that answers an injected turn (a test vector) is handed over
    on the event loop, with no thread hop; any other runs in the pool as usual."""
    fn.vector_first = True  # type: ignore[attr-defined]
    return fn


def _inline(fn: Callable[..., Message]) -> Callable[..., Message]:
    """Marks a handler that never touches the engine: it answers on the event loop, needing no thread."""
    fn.inline = True  # type: ignore[attr-defined]
    return fn


class TaskHubServicer:
    """TaskHubSidecarService, Dapr dialect (protocol-facts.md §2.1)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @_inline
    def Hello(self, req: Message, context: Call) -> Message:
        return empty_pb2.Empty()

    @_waits
    def StartInstance(self, req: pb.CreateInstanceRequest, context: Call) -> Message:
        scheduled = ts_ns(req.scheduledStartTimestamp) if req.HasField("scheduledStartTimestamp") else 0
        iid = self.engine.start_instance(
            instance_id=req.instanceId, name=req.name,
            input=req.input.value if req.HasField("input") else None,
            scheduled_start_ns=scheduled if scheduled > 0 else None,
            enforce_unique=req.enforceUniqueInstanceId, tags=dict(req.tags),
            trace=req.parentTraceContext if req.HasField("parentTraceContext") else None)
        if scheduled <= self.engine.clock.now_ns():
            # R1.2: StartInstance returns once the first turn has been committed.
            _wait(self.engine, context, iid, lambda v: v.status != pb.ORCHESTRATION_STATUS_PENDING,
                  f"the start of workflow instance '{iid}'")
        return pb.CreateInstanceResponse(instanceId=iid)

    def GetInstance(self, req: pb.GetInstanceRequest, context: Call) -> Message:
        view = self.engine.get_instance(req.instanceId)
        return _instance_response(view, with_payloads=req.getInputsAndOutputs)

    @_waits
    def WaitForInstanceStart(self, req: pb.GetInstanceRequest, context: Call) -> Message:
        view = _wait(self.engine, context, req.instanceId,
                     lambda v: v.status != pb.ORCHESTRATION_STATUS_PENDING,
                     f"the start of workflow instance '{req.instanceId}'")
        return _instance_response(view, with_payloads=req.getInputsAndOutputs)

    @_waits
    def WaitForInstanceCompletion(self, req: pb.GetInstanceRequest, context: Call) -> Message:
        view = _wait(self.engine, context, req.instanceId, lambda v: v.status in _TERMINAL,
                     f"the completion of workflow instance '{req.instanceId}'")
        return _instance_response(view, with_payloads=req.getInputsAndOutputs)

    def RaiseEvent(self, req: pb.RaiseEventRequest, context: Call) -> Message:
        self.engine.raise_event(iid=req.instanceId, name=req.name,
                                input=req.input.value if req.HasField("input") else None)
        return pb.RaiseEventResponse()

    @_waits
    def TerminateInstance(self, req: pb.TerminateRequest, context: Call) -> Message:
        self.engine.terminate(iid=req.instanceId, output=req.output.value if req.HasField("output") else None,
                              recursive=req.recursive)
        # A retention of 0 may purge the instance as soon as it is terminated: that ends the wait too.
        done = self.engine.wait(req.instanceId, lambda v: v.status in _TERMINAL, timeout=context.time_remaining(),
                                is_active=context.is_active, gone_is_done=True)
        if done is None:
            raise _deadline_exceeded(f"the termination of workflow instance '{req.instanceId}'")
        return pb.TerminateResponse()

    @_waits
    def SuspendInstance(self, req: pb.SuspendRequest, context: Call) -> Message:
        self.engine.suspend(iid=req.instanceId, reason=req.reason.value if req.HasField("reason") else None)
        _wait(self.engine, context, req.instanceId,
              lambda v: v.status == pb.ORCHESTRATION_STATUS_SUSPENDED or v.status in _TERMINAL,
              f"the suspension of workflow instance '{req.instanceId}'")
        return pb.SuspendResponse()

    @_waits
    def ResumeInstance(self, req: pb.ResumeRequest, context: Call) -> Message:
        if self.engine.resume(iid=req.instanceId, reason=req.reason.value if req.HasField("reason") else None):
            _wait(self.engine, context, req.instanceId,
                  lambda v: v.status != pb.ORCHESTRATION_STATUS_SUSPENDED,
                  f"the resumption of workflow instance '{req.instanceId}'")
        return pb.ResumeResponse()

    def PurgeInstances(self, req: pb.PurgeInstancesRequest, context: Call) -> Message:
        which = req.WhichOneof("request")
        if which == "purgeInstanceFilter":
            flt = req.purgeInstanceFilter
            count = self.engine.purge_by_filter(
                created_from_ns=ts_ns(flt.createdTimeFrom) if flt.HasField("createdTimeFrom") else None,
                created_to_ns=ts_ns(flt.createdTimeTo) if flt.HasField("createdTimeTo") else None,
                statuses=frozenset(flt.runtimeStatus))
            return pb.PurgeInstancesResponse(deletedInstanceCount=count)
        if which is None or not req.instanceId:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "PurgeInstances needs an instanceId")
        count = self.engine.purge(iid=req.instanceId, recursive=req.recursive, force=req.force)
        return pb.PurgeInstancesResponse(deletedInstanceCount=count)

    def CompleteActivityTask(self, req: pb.ActivityResponse, context: Call) -> Message:
        self.engine.complete_activity(req)
        return pb.CompleteTaskResponse()

    @_vector_first
    def CompleteWorkflowTask(self, req: pb.WorkflowResponse, context: Call) -> Message:
        self.engine.complete_turn(req)
        return pb.CompleteTaskResponse()

    # Deprecated alias with the same handler (R0.2): the Python SDKs call this one.
    CompleteOrchestratorTask = CompleteWorkflowTask

    def RerunWorkflowFromEvent(self, req: pb.RerunWorkflowFromEventRequest, context: Call) -> Message:
        new_id = self.engine.rerun(
            source=req.sourceInstanceID, event_id=req.eventID,
            new_iid=req.newInstanceID if req.HasField("newInstanceID") else None,
            input=req.input.value if req.HasField("input") else None, overwrite_input=req.overwriteInput,
            new_child_iid=req.newChildWorkflowInstanceID if req.HasField("newChildWorkflowInstanceID") else None)
        return pb.RerunWorkflowFromEventResponse(newInstanceID=new_id)

    def ListInstanceIDs(self, req: pb.ListInstanceIDsRequest, context: Call) -> Message:
        ids, token = self.engine.list_instance_ids(
            page_size=req.pageSize if req.HasField("pageSize") else 0,
            token=req.continuationToken if req.HasField("continuationToken") else None)
        resp = pb.ListInstanceIDsResponse(instanceIds=ids)
        if token is not None:
            resp.continuationToken = token
        return resp

    def GetInstanceHistory(self, req: pb.GetInstanceHistoryRequest, context: Call) -> Message:
        return pb.GetInstanceHistoryResponse(events=self.engine.history(req.instanceId))


def _instance_response(view: InstanceView | None, *, with_payloads: bool) -> pb.GetInstanceResponse:
    """R1.7: payloads only on request; scheduled/completed timestamps, executionId and tags never."""
    if view is None:
        return pb.GetInstanceResponse(exists=False)
    resp = pb.GetInstanceResponse(exists=True)
    st = resp.workflowState
    st.instanceId = view.iid
    st.name = view.name
    st.workflowStatus = view.status
    st.createdTimestamp.CopyFrom(ts(view.created_ns))
    st.lastUpdatedTimestamp.CopyFrom(ts(view.last_updated_ns))
    if view.started_ns is not None:
        st.startedAt.CopyFrom(ts(view.started_ns))
    if view.version:
        st.version.value = view.version
    if view.parent_iid:
        st.parentInstanceId.value = view.parent_iid
        if view.parent_app:
            st.parentAppId.value = view.parent_app
    if with_payloads:
        if view.input is not None:
            st.input.value = view.input
        if view.output is not None:
            st.output.value = view.output
        if view.custom_status is not None:
            st.customStatus.value = view.custom_status
        if view.failure is not None:
            st.failureDetails.CopyFrom(view.failure)
    return resp


class DaprWorkflowServicer:
    """The workflow methods of the Dapr runtime API, mapped onto the same engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @_waits
    def StartWorkflow(self, req: rt.StartWorkflowRequest, context: Call) -> Message:
        if not req.workflow_name:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "StartWorkflow needs workflow_name")
        iid = self.engine.start_instance(instance_id=req.instance_id, name=req.workflow_name,
                                         input=_utf8(req.input, "input") or None)
        _wait(self.engine, context, iid, lambda v: v.status != pb.ORCHESTRATION_STATUS_PENDING,
              f"the start of workflow instance '{iid}'")
        return rt.StartWorkflowResponse(instance_id=iid)

    def GetWorkflow(self, req: rt.GetWorkflowRequest, context: Call) -> Message:
        view = self.engine.get_instance(req.instance_id)
        if view is None:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"workflow instance '{req.instance_id}' not found")
        resp = rt.GetWorkflowResponse(instance_id=view.iid, workflow_name=view.name,
                                      runtime_status=status_name(view.status))
        resp.created_at.CopyFrom(ts(view.created_ns))
        resp.last_updated_at.CopyFrom(ts(view.last_updated_ns))
        props = resp.properties
        if view.input is not None:
            props["dapr.workflow.input"] = view.input
        if view.output is not None:
            props["dapr.workflow.output"] = view.output
        if view.custom_status is not None:
            props["dapr.workflow.custom_status"] = view.custom_status
        if view.failure is not None:
            props["dapr.workflow.failure.error_type"] = view.failure.errorType
            props["dapr.workflow.failure.error_message"] = view.failure.errorMessage
        return resp

    @_waits
    def TerminateWorkflow(self, req: rt.TerminateWorkflowRequest, context: Call) -> Message:
        self.engine.terminate(iid=req.instance_id, output=None, recursive=True)
        _wait(self.engine, context, req.instance_id, lambda v: v.status in _TERMINAL,
              f"the termination of workflow instance '{req.instance_id}'")
        return empty_pb2.Empty()

    def RaiseEventWorkflow(self, req: rt.RaiseEventWorkflowRequest, context: Call) -> Message:
        data = _utf8(req.event_data, "event_data")
        self.engine.raise_event(iid=req.instance_id, name=req.event_name, input=data or None)
        return empty_pb2.Empty()

    @_waits
    def PauseWorkflow(self, req: rt.PauseWorkflowRequest, context: Call) -> Message:
        self.engine.suspend(iid=req.instance_id, reason=None)
        _wait(self.engine, context, req.instance_id,
              lambda v: v.status == pb.ORCHESTRATION_STATUS_SUSPENDED or v.status in _TERMINAL,
              f"the suspension of workflow instance '{req.instance_id}'")
        return empty_pb2.Empty()

    @_waits
    def ResumeWorkflow(self, req: rt.ResumeWorkflowRequest, context: Call) -> Message:
        if self.engine.resume(iid=req.instance_id, reason=None):
            _wait(self.engine, context, req.instance_id,
                  lambda v: v.status != pb.ORCHESTRATION_STATUS_SUSPENDED,
                  f"the resumption of workflow instance '{req.instance_id}'")
        return empty_pb2.Empty()

    def PurgeWorkflow(self, req: rt.PurgeWorkflowRequest, context: Call) -> Message:
        self.engine.purge(iid=req.instance_id, recursive=True, force=False)
        return empty_pb2.Empty()


def _utf8(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} is not UTF-8 text: {exc}") from None


_CODES = {name: getattr(grpc.StatusCode, name) for name in (
    "NOT_FOUND", "ALREADY_EXISTS", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "UNIMPLEMENTED", "CANCELLED",
    "RESOURCE_EXHAUSTED", "UNAVAILABLE", "DATA_LOSS", "UNKNOWN")}


class _Edge:
    """The asyncio side of every RPC: check the API token, then hand the call to the engine."""

    def __init__(self, *, engine: Engine, loop: asyncio.AbstractEventLoop, api_token: str | None,
                 max_message_bytes: int, quick: futures.ThreadPoolExecutor,
                 waiting: futures.ThreadPoolExecutor) -> None:
        self.engine = engine
        self.loop = loop
        self.api_token = api_token
        self.max_message_bytes = max_message_bytes
        self.quick = quick
        self.waiting = waiting
        self.pump = WorkItemPump(engine, loop)

    def handlers(self, table: ServiceTable, servicer: Any, stem: Callable[[str], str]) -> grpc.GenericRpcHandler:
        handlers: dict[str, grpc.RpcMethodHandler] = {}
        for method in table.methods.values():
            if method.kind is Kind.SERVER_STREAM:  # GetWorkItems, the only stream of either service
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(self._work_items(method.request))
            else:
                fn = getattr(servicer, stem(method.name))
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                    self._unary(method.name, fn, method.request))
        return grpc.method_handlers_generic_handler(table.name, handlers)

    def _check_token(self, context: grpc.aio.ServicerContext) -> None:
        if self.api_token is None:
            return
        sent = dict(context.invocation_metadata() or ()).get(TOKEN_HEADER)
        if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), self.api_token.encode()):
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED,
                         f"missing or invalid '{TOKEN_HEADER}' metadata; this sidecar was started with an API token")

    def _unary(self, name: str, fn: Callable[[Any, Call], Message], request_type: type[Message],
               ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        pool = self.waiting if getattr(fn, "waits", False) else self.quick

        def run(raw: bytes, call: Call) -> bytes:
            reply = wire(fn(_parse(raw, request_type), call))
            if len(reply) > self.max_message_bytes:
                raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"the answer to {name} is {len(reply)} bytes, more than this sidecar's "
                             f"--max-message-bytes {self.max_message_bytes}; ask for less (e.g. without inputs "
                             "and outputs) or raise the limit on both sides")
            return reply

        inline = getattr(fn, "inline", False)
        vector_first = getattr(fn, "vector_first", False)
        done = wire(pb.CompleteTaskResponse())

        async def handler(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            try:
                self._check_token(context)
                if inline:
                    return run(raw, Call(context))
                if vector_first and self.engine.vectors is not None \
                        and self.engine.claim_vector_answer(_parse(raw, request_type)):  # type: ignore[arg-type]
                    return done
                return await self.loop.run_in_executor(pool, run, raw, Call(context))
            except Exception as exc:  # noqa: BLE001 - every failure becomes a status, never a crash
                failure = _translate(exc)
            await context.abort(failure.code, failure.message)
            raise AssertionError("unreachable")

        return handler

    def _work_items(self, request_type: type[Message],
                    ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[None]]:
        engine = self.engine

        async def handler(raw: bytes, context: grpc.aio.ServicerContext) -> None:
            failure: _Abort | None = None
            sid: int | None = None
            try:
                self._check_token(context)
                req = _parse(raw, request_type)
                stateful = pb.WORKER_CAPABILITY_STATEFUL_HISTORY in req.capabilities
                sid = await self.loop.run_in_executor(
                    self.quick, functools.partial(engine.open_stream, stateful=stateful))
                while True:
                    item = await self.pump.next_item(sid)
                    try:
                        await context.write(item)
                    except Exception:  # noqa: BLE001 - the client went away or refused the item
                        log.info("work item stream %s ended while a work item was sent; it is redelivered", sid)
                        # Ends the call as cancelled: returning would make grpc send a status on a dead call.
                        raise asyncio.CancelledError() from None
            except ShuttingDown as exc:
                failure = _Abort(grpc.StatusCode.CANCELLED, exc.message)
            except Exception as exc:  # noqa: BLE001
                failure = _translate(exc)
            finally:
                if sid is not None:
                    # Not awaited: this also runs when the stream is cancelled. The engine then
                    # redelivers whatever was out on the stream.
                    self.loop.run_in_executor(self.quick, engine.close_stream, sid)
            if failure is not None:
                await context.abort(failure.code, failure.message)

        return handler


def _parse(raw: bytes, request_type: type[Message]) -> Message:
    try:
        return request_type.FromString(raw)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                     f"malformed {request_type.DESCRIPTOR.name}: {exc}; "
                     "check that the client speaks the Dapr dialect of TaskHubSidecarService") from None


def _translate(exc: BaseException) -> _Abort:
    if isinstance(exc, _Abort):
        return exc
    if isinstance(exc, EngineError):
        return _Abort(_CODES.get(exc.code, grpc.StatusCode.UNKNOWN), exc.message)
    log.exception("internal error while serving a request")
    return _Abort(grpc.StatusCode.INTERNAL, f"internal error in the reference sidecar: {exc!r} (see its log)")


@dataclass
class _Listener:
    """One app's listening address (R11.1)."""

    app: str
    server: grpc.aio.Server
    port: int
    edge: _Edge


# Threads for unary calls that do not wait; a GetInstance needs one only for a moment.
_QUICK_THREADS = 32


@dataclass
class SidecarServer:
    """A running reference sidecar (in-process). Use `SidecarServer.start(...)`."""

    server: grpc.aio.Server
    engine: Engine
    host: str
    port: int
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _loop_thread: threading.Thread = field(repr=False)
    _edge: _Edge = field(repr=False)
    _more: list[_Listener] = field(default_factory=list, repr=False)  # the other apps' listeners
    apps: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def start(cls, *, host: str = "127.0.0.1", port: int = 0, db: str = ":memory:",
              api_token: str | None = None, activity_lease: float | None = None,
              max_payload: int | None = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
              strict_tokens: bool = False, clock: str | Clock = "real", max_workers: int = 512,
              engine_class: type[Engine] = Engine, policy: EnginePolicy = REFERENCE_POLICY,
              task_execution_id: str = "passthrough", apps: tuple[str, ...] = (),
              app_ports: dict[str, int] | None = None, max_concurrent_workflows: int | None = None,
              max_concurrent_activities: int | None = None, retention_s: Mapping[str, float] | None = None,
              stateful_history: bool = True, late_timeout_timers: bool = False,
              access_policies: tuple[tuple[str, tuple[Any, ...]], ...] = (),
              policy_scopes: tuple[tuple[str, tuple[str, ...]], ...] = (),
              namespaces: tuple[tuple[str, str], ...] = (),
              app_max_payload: tuple[tuple[str, int], ...] = ()) -> "SidecarServer":
        """`engine_class` lets `conformance replay` refuse management calls; `policy` lets the
        harness's tests run deliberately broken engines (mutants, tests/mutants/variants.py);
        `task_execution_id` is `spec` (a fresh id per activity dispatch) or `passthrough` (the SDK's).

        `max_concurrent_workflows` / `max_concurrent_activities` bound the work items of that kind out
        on the streams at once, `retention_s` purges a finished instance that many seconds after it
        finished (keys COMPLETED, FAILED, TERMINATED, or ANY), `stateful_history=False` sends full
        histories even to workers that announce stateful history (daprd's Configuration settings).
        `clock` is "real", "virtual" or a clock to go on with (a restart on a virtual clock must not
        go back in time to before the timers its store holds).
        `late_timeout_timers` keeps a wait's timeout timer after its event won, so the TimerFired is
        delivered late as durabletask-go's sidecar delivers it (R6.3).

        `max_message_bytes` bounds every gRPC message both ways: a bigger request is refused
        with RESOURCE_EXHAUSTED before it is read, and a workflow whose turn would not fit
        stalls with PAYLOAD_SIZE_EXCEEDED instead of being dispatched. `max_workers` bounds the
        calls that wait for an instance at once; work-item streams take no thread.
        """
        if isinstance(clock, str) and clock not in ("real", "virtual"):
            raise ValueError(f"unknown clock {clock!r}; known: real, virtual")
        modes = {m.value: m for m in TaskExecutionIdMode}
        if task_execution_id not in modes:
            raise ValueError(f"unknown task_execution_id mode {task_execution_id!r}; known: {', '.join(modes)}")
        if max_message_bytes <= 0:
            raise ValueError(f"max_message_bytes must be greater than 0, not {max_message_bytes}")
        if isinstance(clock, str):
            clock = VirtualClock() if clock == "virtual" else RealClock()
        engine = engine_class(store=open_store(db), clock=clock,
                              config=EngineConfig(activity_lease_s=activity_lease, max_payload=max_payload,
                                                  max_message_bytes=max_message_bytes,
                                                  strict_tokens=strict_tokens,
                                                  task_execution_id=modes[task_execution_id],
                                                  apps=tuple(apps), access_policies=access_policies,
                                                  policy_scopes=policy_scopes, namespaces=namespaces,
                                                  app_max_payload=app_max_payload,
                                                  max_concurrent_workflows=max_concurrent_workflows,
                                                  max_concurrent_activities=max_concurrent_activities,
                                                  retention_s=tuple(sorted((retention_s or {}).items())),
                                                  stateful_history=stateful_history,
                                                  late_timeout_timers=late_timeout_timers),
                              policy=policy)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="sidecar-grpc-loop", daemon=True)
        thread.start()

        def make_edge(scoped: Any) -> _Edge:
            return _Edge(engine=scoped, loop=loop, api_token=api_token, max_message_bytes=max_message_bytes,
                         quick=futures.ThreadPoolExecutor(max_workers=_QUICK_THREADS, thread_name_prefix="sidecar-rpc"),
                         waiting=futures.ThreadPoolExecutor(max_workers=max_workers,
                                                            thread_name_prefix="sidecar-wait"))

        async def serve(edge: _Edge, scoped: Any, at_port: int) -> tuple[grpc.aio.Server, int]:
            server = grpc.aio.server(options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
                # The Dapr SDKs send HTTP/2 pings every 30 s even when idle (sdk-wire-behaviour.md §2.2).
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
                ("grpc.http2.max_ping_strikes", 0),
                ("grpc.so_reuseport", 0),
            ])
            server.add_generic_rpc_handlers([
                edge.handlers(TASKHUB, TaskHubServicer(scoped), stem=lambda n: n),
                edge.handlers(DAPR_WORKFLOW, DaprWorkflowServicer(scoped),
                              stem=lambda n: n.removesuffix("Beta1").removesuffix("Alpha1")),
            ])
            try:
                bound = server.add_insecure_port(f"{host}:{at_port}")
            except RuntimeError:  # grpcio raises where older versions returned 0
                bound = 0
            if bound:
                await server.start()
            return server, bound

        # R11.1: one listening address per app id, as daprd runs one sidecar per app; the first is the
        # default app's (`port`), the others' ports are `app_ports` (0: pick).
        from fake_sidecar.engine.apps import AppScope

        scopes: list[tuple[str, Any]] = [("", engine)] if not apps else \
            [(name, AppScope(engine, engine.config.app_key(name))) for name in apps]
        listeners: list[_Listener] = []
        for i, (name, scoped) in enumerate(scopes):
            edge = make_edge(scoped)
            at_port = port if i == 0 else dict(app_ports or {}).get(name, 0)
            server, bound = asyncio.run_coroutine_threadsafe(serve(edge, scoped, at_port), loop).result(timeout=60)
            if bound == 0:
                for done in listeners:
                    asyncio.run_coroutine_threadsafe(done.server.stop(0), loop).result(timeout=10)
                    done.edge.pump.close()
                _shutdown(edge, loop, thread)
                engine.close()
                raise OSError(f"cannot listen on {host}:{at_port}: the address is in use or not available here")
            listeners.append(_Listener(app=name, server=server, port=bound, edge=edge))
        engine.start()
        first = listeners[0]
        return cls(server=first.server, engine=engine, host=host, port=first.port, _loop=loop, _loop_thread=thread,
                   _edge=first.edge, _more=listeners[1:], apps=tuple(apps))

    @property
    def app_addresses(self) -> dict[str, str]:
        """App id -> the address its workers and clients use (only when the sidecar hosts several apps)."""
        if not self.apps:
            return {}
        return {self.apps[0]: self.address, **{lst.app: f"{self.host}:{lst.port}" for lst in self._more}}

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving: open streams end with CANCELLED "shutting down", then the store closes. A second
        stop does nothing (a harness may stop a sidecar a scenario already stopped)."""
        if self._loop.is_closed():
            return
        done = threading.Event()

        def _close_engine() -> None:
            self.engine.close()
            done.set()

        # Close the engine first so blocked streams and waits return at once.
        self._edge.pump.close()
        for more in self._more:
            more.edge.pump.close()
        threading.Thread(target=_close_engine, daemon=True).start()
        for server in [self.server] + [more.server for more in self._more]:
            try:
                asyncio.run_coroutine_threadsafe(server.stop(grace), self._loop).result(timeout=grace + 5)
            except (futures.TimeoutError, RuntimeError):
                log.warning("the gRPC server did not stop within %.1fs", grace + 5)
        done.wait(10)
        for more in self._more:
            more.edge.pump.join(5)
            more.edge.quick.shutdown(wait=False, cancel_futures=True)
            more.edge.waiting.shutdown(wait=False, cancel_futures=True)
        _shutdown(self._edge, self._loop, self._loop_thread)


def _shutdown(edge: _Edge, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    edge.pump.close()
    edge.pump.join(5)
    # A second stop (or a loop that already ended) finds the loop closed: there is nothing left to stop.
    if not loop.is_closed():
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:  # closed between the check and the call
            pass
        thread.join(5)
        if not thread.is_alive() and not loop.is_closed():
            loop.close()
    edge.quick.shutdown(wait=False, cancel_futures=True)
    edge.waiting.shutdown(wait=False, cancel_futures=True)
