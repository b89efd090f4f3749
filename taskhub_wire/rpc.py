"""Method tables and thin clients for the two gRPC services we speak.

The generated modules carry our own proto packages (``taskhub.dapr.v1``, ``taskhub.daprrt.v1``),
but the wire paths must be the upstream ones: ``/TaskHubSidecarService/<Method>`` (upstream
declares no package) and ``/dapr.proto.runtime.v1.Dapr/<Method>``. So we do not use generated
stubs; servers and clients take path, classes and kind from the tables below.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from taskhub_wire.dapr import taskhub_pb2 as pb
from taskhub_wire.daprrt import workflow_pb2 as rt

Metadata = Sequence[tuple[str, str | bytes]]


class Kind(enum.Enum):
    UNARY = "unary"
    SERVER_STREAM = "server_stream"


@dataclass(frozen=True, slots=True, kw_only=True)
class Method:
    """One RPC: where it lives on the wire and which classes it (de)serialises."""

    service: str  # upstream full service name, as it appears in the path
    name: str
    request: type[Message]
    response: type[Message]
    kind: Kind = Kind.UNARY
    deprecated: bool = False

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceTable:
    """The methods of one upstream service, by method name."""

    name: str
    methods: Mapping[str, Method] = field(repr=False)

    def method(self, name: str) -> Method:
        try:
            return self.methods[name]
        except KeyError:
            known = ", ".join(self.methods)
            raise KeyError(f"unknown {self.name} method {name!r}; known: {known}") from None

    @property
    def paths(self) -> Mapping[str, Method]:
        return MappingProxyType({m.path: m for m in self.methods.values()})


def _table(service: str, *methods: tuple[str, type[Message], type[Message]] | Method) -> ServiceTable:
    """Build a table; plain ``(name, request, response)`` tuples are unary, non-deprecated methods."""
    built: dict[str, Method] = {}
    for entry in methods:
        if not isinstance(entry, Method):
            name, request, response = entry
            entry = Method(service=service, name=name, request=request, response=response)
        built[entry.name] = entry
    return ServiceTable(name=service, methods=MappingProxyType(built))


_Empty = empty_pb2.Empty

# docs/protocol-facts.md §2.1 (the current Dapr dialect), in upstream order.
TASKHUB = _table(
    "TaskHubSidecarService",
    ("Hello", _Empty, _Empty),
    ("StartInstance", pb.CreateInstanceRequest, pb.CreateInstanceResponse),
    ("GetInstance", pb.GetInstanceRequest, pb.GetInstanceResponse),
    ("WaitForInstanceStart", pb.GetInstanceRequest, pb.GetInstanceResponse),
    ("WaitForInstanceCompletion", pb.GetInstanceRequest, pb.GetInstanceResponse),
    ("RaiseEvent", pb.RaiseEventRequest, pb.RaiseEventResponse),
    ("TerminateInstance", pb.TerminateRequest, pb.TerminateResponse),
    ("SuspendInstance", pb.SuspendRequest, pb.SuspendResponse),
    ("ResumeInstance", pb.ResumeRequest, pb.ResumeResponse),
    ("PurgeInstances", pb.PurgeInstancesRequest, pb.PurgeInstancesResponse),
    Method(
        service="TaskHubSidecarService",
        name="GetWorkItems",
        request=pb.GetWorkItemsRequest,
        response=pb.WorkItem,
        kind=Kind.SERVER_STREAM,
    ),
    ("CompleteActivityTask", pb.ActivityResponse, pb.CompleteTaskResponse),
    # Deprecated upstream but still what the Dapr Python SDKs call; same payload as CompleteWorkflowTask.
    Method(
        service="TaskHubSidecarService",
        name="CompleteOrchestratorTask",
        request=pb.WorkflowResponse,
        response=pb.CompleteTaskResponse,
        deprecated=True,
    ),
    ("CompleteWorkflowTask", pb.WorkflowResponse, pb.CompleteTaskResponse),
    ("RerunWorkflowFromEvent", pb.RerunWorkflowFromEventRequest, pb.RerunWorkflowFromEventResponse),
    ("ListInstanceIDs", pb.ListInstanceIDsRequest, pb.ListInstanceIDsResponse),
    ("GetInstanceHistory", pb.GetInstanceHistoryRequest, pb.GetInstanceHistoryResponse),
)

_DAPR = "dapr.proto.runtime.v1.Dapr"


def _dapr_pair(stem: str, request: type[Message], response: type[Message]) -> tuple[Method, Method]:
    # Alpha1 is the deprecated alias of Beta1, with the same request and response types.
    return (
        Method(service=_DAPR, name=f"{stem}Beta1", request=request, response=response),
        Method(service=_DAPR, name=f"{stem}Alpha1", request=request, response=response, deprecated=True),
    )


# Workflow methods of the Dapr runtime API (types from the dapr 1.18.3 descriptors).
DAPR_WORKFLOW = _table(
    _DAPR,
    *_dapr_pair("StartWorkflow", rt.StartWorkflowRequest, rt.StartWorkflowResponse),
    *_dapr_pair("GetWorkflow", rt.GetWorkflowRequest, rt.GetWorkflowResponse),
    *_dapr_pair("PurgeWorkflow", rt.PurgeWorkflowRequest, _Empty),
    *_dapr_pair("TerminateWorkflow", rt.TerminateWorkflowRequest, _Empty),
    *_dapr_pair("PauseWorkflow", rt.PauseWorkflowRequest, _Empty),
    *_dapr_pair("ResumeWorkflow", rt.ResumeWorkflowRequest, _Empty),
    *_dapr_pair("RaiseEventWorkflow", rt.RaiseEventWorkflowRequest, _Empty),
)


class StreamCall(Protocol):
    """What ``stream()`` returns: an iterator of responses that is also a cancellable grpc call."""

    def __iter__(self) -> Iterator[Message]: ...
    def cancel(self) -> bool: ...
    def code(self) -> grpc.StatusCode | None: ...
    def details(self) -> str | None: ...


class _ServiceClient:
    """Calls the methods of one ServiceTable by name over a caller-owned channel."""

    table: ServiceTable

    def __init__(self, channel: grpc.Channel, *, metadata: Metadata = ()) -> None:
        self._channel = channel
        self._metadata = tuple(metadata)
        # Multi-callables are made on first use and reused, one per method.
        self._unary: dict[str, grpc.UnaryUnaryMultiCallable[Message, Message]] = {}
        self._streams: dict[str, grpc.UnaryStreamMultiCallable[Message, Message]] = {}

    def call(
        self,
        name: str,
        request: Message,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        wait_for_ready: bool | None = None,
    ) -> Message:
        """Invoke a unary method and return its response message."""
        method = self._checked(name, request, Kind.UNARY)
        callable_ = self._unary.get(method.name)
        if callable_ is None:
            callable_ = self._unary[method.name] = self._channel.unary_unary(
                method.path,
                request_serializer=method.request.SerializeToString,
                response_deserializer=method.response.FromString,
            )
        return callable_(
            request, timeout=timeout, metadata=self._metadata + tuple(metadata), wait_for_ready=wait_for_ready
        )

    def stream(
        self,
        name: str,
        request: Message,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        wait_for_ready: bool | None = None,
    ) -> StreamCall:
        """Invoke a server-streaming method; iterate the result, ``cancel()`` it to hang up."""
        method = self._checked(name, request, Kind.SERVER_STREAM)
        callable_ = self._streams.get(method.name)
        if callable_ is None:
            callable_ = self._streams[method.name] = self._channel.unary_stream(
                method.path,
                request_serializer=method.request.SerializeToString,
                response_deserializer=method.response.FromString,
            )
        return callable_(
            request, timeout=timeout, metadata=self._metadata + tuple(metadata), wait_for_ready=wait_for_ready
        )

    def _checked(self, name: str, request: Message, kind: Kind) -> Method:
        method = self.table.method(name)
        if method.kind is not kind:
            use = "stream()" if method.kind is Kind.SERVER_STREAM else "call()"
            raise ValueError(f"{method.path} is {method.kind.value}; use {use}")
        # Both dialects have e.g. a HistoryEvent; sending the wrong class would encode silently.
        if not isinstance(request, method.request):
            raise TypeError(
                f"{method.path} takes {method.request.DESCRIPTOR.full_name}, got {type(request).DESCRIPTOR.full_name}"
            )
        return method


class TaskHubClient(_ServiceClient):
    """Client of ``TaskHubSidecarService`` (Dapr dialect) on the upstream paths."""

    table = TASKHUB


class DaprWorkflowClient(_ServiceClient):
    """Client of the workflow methods of the Dapr runtime API (``dapr.proto.runtime.v1.Dapr``)."""

    table = DAPR_WORKFLOW
