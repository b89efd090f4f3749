"""gRPC edge of the reference engine: decode, call the engine, encode, map errors.

Both services are served through generic handlers on their upstream paths
(`/TaskHubSidecarService/<Method>` and `/dapr.proto.runtime.v1.Dapr/<Method>`);
any other method answers UNIMPLEMENTED. Requests arrive as raw bytes so that a
malformed payload gets INVALID_ARGUMENT with a clear message, not INTERNAL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import DecodeError, Message

from taskhub_wire import pb, rt
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, Kind, ServiceTable

from fake_sidecar.engine import Engine, EngineConfig, EngineError, RealClock, TaskExecutionIdMode, VirtualClock
from fake_sidecar.engine.errors import ShuttingDown
from fake_sidecar.engine.model import InstanceView, ts, ts_ns
from fake_sidecar.engine.store import open_store
from fake_sidecar.engine.turns import status_name

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


def _wait(engine: Engine, context: grpc.ServicerContext, iid: str, pred: Callable[[InstanceView], bool],
          what: str) -> InstanceView:
    view = engine.wait(iid, pred, timeout=context.time_remaining(), is_active=context.is_active)
    if view is None:
        raise _deadline_exceeded(what)
    return view


class TaskHubServicer:
    """TaskHubSidecarService, Dapr dialect (protocol-facts.md §2.1)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def Hello(self, req: Message, context: grpc.ServicerContext) -> Message:
        return empty_pb2.Empty()

    def StartInstance(self, req: pb.CreateInstanceRequest, context: grpc.ServicerContext) -> Message:
        scheduled = ts_ns(req.scheduledStartTimestamp) if req.HasField("scheduledStartTimestamp") else 0
        iid = self.engine.start_instance(
            instance_id=req.instanceId, name=req.name,
            input=req.input.value if req.HasField("input") else None,
            scheduled_start_ns=scheduled if scheduled > 0 else None,
            enforce_unique=req.enforceUniqueInstanceId, tags=dict(req.tags))
        if scheduled <= self.engine.clock.now_ns():
            # R1.2: StartInstance returns once the first turn has been committed.
            _wait(self.engine, context, iid, lambda v: v.status != pb.ORCHESTRATION_STATUS_PENDING,
                  f"the start of workflow instance '{iid}'")
        return pb.CreateInstanceResponse(instanceId=iid)

    def GetInstance(self, req: pb.GetInstanceRequest, context: grpc.ServicerContext) -> Message:
        view = self.engine.get_instance(req.instanceId)
        return _instance_response(view, with_payloads=req.getInputsAndOutputs)

    def WaitForInstanceStart(self, req: pb.GetInstanceRequest, context: grpc.ServicerContext) -> Message:
        view = _wait(self.engine, context, req.instanceId,
                     lambda v: v.status != pb.ORCHESTRATION_STATUS_PENDING,
                     f"the start of workflow instance '{req.instanceId}'")
        return _instance_response(view, with_payloads=req.getInputsAndOutputs)

    def WaitForInstanceCompletion(self, req: pb.GetInstanceRequest, context: grpc.ServicerContext) -> Message:
        view = _wait(self.engine, context, req.instanceId, lambda v: v.status in _TERMINAL,
                     f"the completion of workflow instance '{req.instanceId}'")
        return _instance_response(view, with_payloads=req.getInputsAndOutputs)

    def RaiseEvent(self, req: pb.RaiseEventRequest, context: grpc.ServicerContext) -> Message:
        self.engine.raise_event(iid=req.instanceId, name=req.name,
                                input=req.input.value if req.HasField("input") else None)
        return pb.RaiseEventResponse()

    def TerminateInstance(self, req: pb.TerminateRequest, context: grpc.ServicerContext) -> Message:
        self.engine.terminate(iid=req.instanceId, output=req.output.value if req.HasField("output") else None,
                              recursive=req.recursive)
        _wait(self.engine, context, req.instanceId, lambda v: v.status in _TERMINAL,
              f"the termination of workflow instance '{req.instanceId}'")
        return pb.TerminateResponse()

    def SuspendInstance(self, req: pb.SuspendRequest, context: grpc.ServicerContext) -> Message:
        self.engine.suspend(iid=req.instanceId, reason=req.reason.value if req.HasField("reason") else None)
        _wait(self.engine, context, req.instanceId,
              lambda v: v.status == pb.ORCHESTRATION_STATUS_SUSPENDED or v.status in _TERMINAL,
              f"the suspension of workflow instance '{req.instanceId}'")
        return pb.SuspendResponse()

    def ResumeInstance(self, req: pb.ResumeRequest, context: grpc.ServicerContext) -> Message:
        if self.engine.resume(iid=req.instanceId, reason=req.reason.value if req.HasField("reason") else None):
            _wait(self.engine, context, req.instanceId,
                  lambda v: v.status != pb.ORCHESTRATION_STATUS_SUSPENDED,
                  f"the resumption of workflow instance '{req.instanceId}'")
        return pb.ResumeResponse()

    def PurgeInstances(self, req: pb.PurgeInstancesRequest, context: grpc.ServicerContext) -> Message:
        which = req.WhichOneof("request")
        if which == "purgeInstanceFilter":
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                         "multi-instance purge is not implemented; purge one instanceId at a time")
        if which is None or not req.instanceId:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "PurgeInstances needs an instanceId")
        count = self.engine.purge(iid=req.instanceId, recursive=req.recursive, force=req.force)
        return pb.PurgeInstancesResponse(deletedInstanceCount=count)

    def GetWorkItems(self, req: pb.GetWorkItemsRequest, context: grpc.ServicerContext) -> Iterator[Message]:
        stateful = pb.WORKER_CAPABILITY_STATEFUL_HISTORY in req.capabilities
        sid = self.engine.open_stream(stateful=stateful)
        # Runs when the client goes away, even while the generator is blocked in take().
        context.add_callback(lambda: self.engine.close_stream(sid))
        try:
            while context.is_active():
                try:
                    item = self.engine.take(sid, timeout=1.0)
                except ShuttingDown as exc:
                    raise _Abort(grpc.StatusCode.CANCELLED, exc.message) from None
                if item is not None:
                    yield item
        finally:
            self.engine.close_stream(sid)

    def CompleteActivityTask(self, req: pb.ActivityResponse, context: grpc.ServicerContext) -> Message:
        self.engine.complete_activity(req)
        return pb.CompleteTaskResponse()

    def CompleteWorkflowTask(self, req: pb.WorkflowResponse, context: grpc.ServicerContext) -> Message:
        self.engine.complete_turn(req)
        return pb.CompleteTaskResponse()

    # Deprecated alias with the same handler (R0.2): the Python SDKs call this one.
    CompleteOrchestratorTask = CompleteWorkflowTask

    def RerunWorkflowFromEvent(self, req: pb.RerunWorkflowFromEventRequest, context: grpc.ServicerContext) -> Message:
        new_id = self.engine.rerun(
            source=req.sourceInstanceID, event_id=req.eventID,
            new_iid=req.newInstanceID if req.HasField("newInstanceID") else None,
            input=req.input.value if req.HasField("input") else None, overwrite_input=req.overwriteInput,
            new_child_iid=req.newChildWorkflowInstanceID if req.HasField("newChildWorkflowInstanceID") else None)
        return pb.RerunWorkflowFromEventResponse(newInstanceID=new_id)

    def ListInstanceIDs(self, req: pb.ListInstanceIDsRequest, context: grpc.ServicerContext) -> Message:
        ids, token = self.engine.list_instance_ids(
            page_size=req.pageSize if req.HasField("pageSize") else 0,
            token=req.continuationToken if req.HasField("continuationToken") else None)
        resp = pb.ListInstanceIDsResponse(instanceIds=ids)
        if token is not None:
            resp.continuationToken = token
        return resp

    def GetInstanceHistory(self, req: pb.GetInstanceHistoryRequest, context: grpc.ServicerContext) -> Message:
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

    def StartWorkflow(self, req: rt.StartWorkflowRequest, context: grpc.ServicerContext) -> Message:
        if not req.workflow_name:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "StartWorkflow needs workflow_name")
        iid = self.engine.start_instance(instance_id=req.instance_id, name=req.workflow_name,
                                         input=_utf8(req.input, "input") or None)
        _wait(self.engine, context, iid, lambda v: v.status != pb.ORCHESTRATION_STATUS_PENDING,
              f"the start of workflow instance '{iid}'")
        return rt.StartWorkflowResponse(instance_id=iid)

    def GetWorkflow(self, req: rt.GetWorkflowRequest, context: grpc.ServicerContext) -> Message:
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

    def TerminateWorkflow(self, req: rt.TerminateWorkflowRequest, context: grpc.ServicerContext) -> Message:
        self.engine.terminate(iid=req.instance_id, output=None, recursive=True)
        _wait(self.engine, context, req.instance_id, lambda v: v.status in _TERMINAL,
              f"the termination of workflow instance '{req.instance_id}'")
        return empty_pb2.Empty()

    def RaiseEventWorkflow(self, req: rt.RaiseEventWorkflowRequest, context: grpc.ServicerContext) -> Message:
        data = _utf8(req.event_data, "event_data")
        self.engine.raise_event(iid=req.instance_id, name=req.event_name, input=data or None)
        return empty_pb2.Empty()

    def PauseWorkflow(self, req: rt.PauseWorkflowRequest, context: grpc.ServicerContext) -> Message:
        self.engine.suspend(iid=req.instance_id, reason=None)
        _wait(self.engine, context, req.instance_id,
              lambda v: v.status == pb.ORCHESTRATION_STATUS_SUSPENDED or v.status in _TERMINAL,
              f"the suspension of workflow instance '{req.instance_id}'")
        return empty_pb2.Empty()

    def ResumeWorkflow(self, req: rt.ResumeWorkflowRequest, context: grpc.ServicerContext) -> Message:
        if self.engine.resume(iid=req.instance_id, reason=None):
            _wait(self.engine, context, req.instance_id,
                  lambda v: v.status != pb.ORCHESTRATION_STATUS_SUSPENDED,
                  f"the resumption of workflow instance '{req.instance_id}'")
        return empty_pb2.Empty()

    def PurgeWorkflow(self, req: rt.PurgeWorkflowRequest, context: grpc.ServicerContext) -> Message:
        self.engine.purge(iid=req.instance_id, recursive=True, force=False)
        return empty_pb2.Empty()


def _utf8(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} is not UTF-8 text: {exc}") from None


_CODES = {name: getattr(grpc.StatusCode, name) for name in (
    "NOT_FOUND", "ALREADY_EXISTS", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "UNIMPLEMENTED", "CANCELLED",
    "UNKNOWN")}


def _handlers(table: ServiceTable, servicer: Any, api_token: str | None,
              stem: Callable[[str], str]) -> grpc.GenericRpcHandler:
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in table.methods.values():
        fn = getattr(servicer, stem(method.name))
        if method.kind is Kind.SERVER_STREAM:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _wrap_stream(fn, method.request, api_token))
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _wrap_unary(fn, method.request, api_token))
    return grpc.method_handlers_generic_handler(table.name, handlers)


def _prepare(raw: bytes, request_type: type[Message], context: grpc.ServicerContext,
             api_token: str | None) -> Message:
    if api_token is not None:
        sent = dict(context.invocation_metadata()).get(TOKEN_HEADER)
        if sent != api_token:
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED,
                         f"missing or invalid '{TOKEN_HEADER}' metadata; this sidecar was started with an API token")
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


def _wrap_unary(fn: Callable[[Any, grpc.ServicerContext], Message], request_type: type[Message],
                api_token: str | None) -> Callable[[bytes, grpc.ServicerContext], bytes]:
    def handler(raw: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            return fn(_prepare(raw, request_type, context, api_token), context).SerializeToString()
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status, never a crash
            failure = _translate(exc)
        context.abort(failure.code, failure.message)
        raise AssertionError("unreachable")

    return handler


def _wrap_stream(fn: Callable[[Any, grpc.ServicerContext], Iterator[Message]], request_type: type[Message],
                 api_token: str | None) -> Callable[[bytes, grpc.ServicerContext], Iterator[bytes]]:
    def handler(raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        failure: _Abort | None = None
        try:
            for item in fn(_prepare(raw, request_type, context, api_token), context):
                yield item.SerializeToString()
        except Exception as exc:  # noqa: BLE001
            failure = _translate(exc)
        if failure is not None:
            context.abort(failure.code, failure.message)

    return handler


@dataclass
class SidecarServer:
    """A running reference sidecar (in-process). Use `SidecarServer.start(...)`."""

    server: grpc.Server
    engine: Engine
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def start(cls, *, host: str = "127.0.0.1", port: int = 0, db: str = ":memory:",
              api_token: str | None = None, activity_lease: float | None = None,
              max_payload: int | None = None, clock: str = "real", max_workers: int = 512,
              engine_class: type[Engine] = Engine, task_execution_id: str = "passthrough") -> "SidecarServer":
        """`engine_class` lets the harness's tests run deliberately broken engines (mutants);
        `task_execution_id` is `spec` (a fresh id per activity dispatch) or `passthrough` (the SDK's)."""
        if clock not in ("real", "virtual"):
            raise ValueError(f"unknown clock {clock!r}; known: real, virtual")
        modes = {m.value: m for m in TaskExecutionIdMode}
        if task_execution_id not in modes:
            raise ValueError(f"unknown task_execution_id mode {task_execution_id!r}; known: {', '.join(modes)}")
        engine = engine_class(store=open_store(db), clock=VirtualClock() if clock == "virtual" else RealClock(),
                              config=EngineConfig(activity_lease_s=activity_lease, max_payload=max_payload,
                                                  task_execution_id=modes[task_execution_id]))
        limit = max(64 * 1024 * 1024, 2 * (max_payload or 0))
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="sidecar-rpc"),
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                # The Dapr SDKs send HTTP/2 pings every 30 s even when idle (sdk-behaviour.md §2.2).
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
                ("grpc.http2.max_ping_strikes", 0),
                ("grpc.so_reuseport", 0),
            ],
        )
        server.add_generic_rpc_handlers([
            _handlers(TASKHUB, TaskHubServicer(engine), api_token, stem=lambda n: n),
            _handlers(DAPR_WORKFLOW, DaprWorkflowServicer(engine), api_token,
                      stem=lambda n: n.removesuffix("Beta1").removesuffix("Alpha1")),
        ])
        try:
            bound = server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:  # grpcio raises where older versions returned 0
            bound = 0
        if bound == 0:
            engine.close()
            raise OSError(f"cannot listen on {host}:{port}: the address is in use or not available here")
        engine.start()
        server.start()
        return cls(server=server, engine=engine, host=host, port=bound)

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving: open streams end with CANCELLED "shutting down", then the store closes."""
        done = threading.Event()

        def _close_engine() -> None:
            self.engine.close()
            done.set()

        closer = threading.Thread(target=_close_engine, daemon=True)
        # Close the engine first so blocked streams and waits return at once.
        closer.start()
        self.server.stop(grace).wait(grace + 5)
        done.wait(10)
