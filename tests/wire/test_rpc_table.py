"""The method tables: upstream paths, classes and kinds, and the clients that use them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from taskhub_wire import pb, rt
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, DaprWorkflowClient, Kind, Method, TaskHubClient

Empty = empty_pb2.Empty

TASKHUB_EXPECTED = {
    "Hello": (Empty, Empty, Kind.UNARY),
    "StartInstance": (pb.CreateInstanceRequest, pb.CreateInstanceResponse, Kind.UNARY),
    "GetInstance": (pb.GetInstanceRequest, pb.GetInstanceResponse, Kind.UNARY),
    "WaitForInstanceStart": (pb.GetInstanceRequest, pb.GetInstanceResponse, Kind.UNARY),
    "WaitForInstanceCompletion": (pb.GetInstanceRequest, pb.GetInstanceResponse, Kind.UNARY),
    "RaiseEvent": (pb.RaiseEventRequest, pb.RaiseEventResponse, Kind.UNARY),
    "TerminateInstance": (pb.TerminateRequest, pb.TerminateResponse, Kind.UNARY),
    "SuspendInstance": (pb.SuspendRequest, pb.SuspendResponse, Kind.UNARY),
    "ResumeInstance": (pb.ResumeRequest, pb.ResumeResponse, Kind.UNARY),
    "PurgeInstances": (pb.PurgeInstancesRequest, pb.PurgeInstancesResponse, Kind.UNARY),
    "GetWorkItems": (pb.GetWorkItemsRequest, pb.WorkItem, Kind.SERVER_STREAM),
    "CompleteActivityTask": (pb.ActivityResponse, pb.CompleteTaskResponse, Kind.UNARY),
    "CompleteOrchestratorTask": (pb.WorkflowResponse, pb.CompleteTaskResponse, Kind.UNARY),
    "CompleteWorkflowTask": (pb.WorkflowResponse, pb.CompleteTaskResponse, Kind.UNARY),
    "RerunWorkflowFromEvent": (pb.RerunWorkflowFromEventRequest, pb.RerunWorkflowFromEventResponse, Kind.UNARY),
    "ListInstanceIDs": (pb.ListInstanceIDsRequest, pb.ListInstanceIDsResponse, Kind.UNARY),
    "GetInstanceHistory": (pb.GetInstanceHistoryRequest, pb.GetInstanceHistoryResponse, Kind.UNARY),
}

# From the dapr 1.18.3 descriptors of dapr.proto.runtime.v1.Dapr.
_DAPR_STEMS = {
    "StartWorkflow": (rt.StartWorkflowRequest, rt.StartWorkflowResponse),
    "GetWorkflow": (rt.GetWorkflowRequest, rt.GetWorkflowResponse),
    "TerminateWorkflow": (rt.TerminateWorkflowRequest, Empty),
    "RaiseEventWorkflow": (rt.RaiseEventWorkflowRequest, Empty),
    "PauseWorkflow": (rt.PauseWorkflowRequest, Empty),
    "ResumeWorkflow": (rt.ResumeWorkflowRequest, Empty),
    "PurgeWorkflow": (rt.PurgeWorkflowRequest, Empty),
}
DAPR_EXPECTED = {
    f"{stem}{suffix}": (request, response, Kind.UNARY)
    for stem, (request, response) in _DAPR_STEMS.items()
    for suffix in ("Beta1", "Alpha1")
}


def test_taskhub_table() -> None:
    assert set(TASKHUB.methods) == set(TASKHUB_EXPECTED)
    for name, (request, response, kind) in TASKHUB_EXPECTED.items():
        method = TASKHUB.method(name)
        assert method.path == f"/TaskHubSidecarService/{name}"
        assert (method.request, method.response, method.kind) == (request, response, kind), name
    assert TASKHUB.method("CompleteOrchestratorTask").deprecated


def test_dapr_workflow_table() -> None:
    assert len(DAPR_WORKFLOW.methods) == 14
    assert set(DAPR_WORKFLOW.methods) == set(DAPR_EXPECTED)
    for name, (request, response, kind) in DAPR_EXPECTED.items():
        method = DAPR_WORKFLOW.method(name)
        assert method.path == f"/dapr.proto.runtime.v1.Dapr/{name}"
        assert (method.request, method.response, method.kind) == (request, response, kind), name
        assert method.deprecated == name.endswith("Alpha1")


@pytest.mark.parametrize(("table", "module"), [(TASKHUB, pb), (DAPR_WORKFLOW, rt)], ids=["taskhub", "daprrt"])
def test_table_agrees_with_proto_service(table, module) -> None:  # type: ignore[no-untyped-def]
    (service,) = module.DESCRIPTOR.services_by_name.values()
    assert service.full_name.rsplit(".", 1)[-1] == table.name.rsplit(".", 1)[-1]
    assert set(service.methods_by_name) == set(table.methods)
    for descriptor in service.methods:
        method = table.method(descriptor.name)
        assert method.request.DESCRIPTOR is descriptor.input_type
        assert method.response.DESCRIPTOR is descriptor.output_type
        assert (method.kind is Kind.SERVER_STREAM) == descriptor.server_streaming
        assert not descriptor.client_streaming
        assert method.deprecated == descriptor.GetOptions().deprecated


def _rpc_list_from_protocol_facts(path: Path) -> dict[str, tuple[str, str, str]]:
    text = path.read_text()
    section = text.split("### 2.1", 1)[1].split("### 2.2", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("RPC", "---") or set(cells[0]) <= {"-"}:
            continue
        name = re.sub(r"\s*\*\(deprecated\)\*", "", cells[0])
        request, response = (re.sub(r"\*\*(stream )?\*\*\s*|\*\*", "", c).strip() for c in cells[1:3])
        rows[name] = (request, response.removeprefix("stream "), cells[3])
    return rows


def test_protocol_facts_rpc_list_is_covered(protocol_facts_path: Path) -> None:
    facts = _rpc_list_from_protocol_facts(protocol_facts_path)
    assert len(facts) == 17, f"parsed {len(facts)} RPCs from section 2.1: {sorted(facts)}"
    for name, (request, response, kind) in facts.items():
        method = TASKHUB.method(name)
        assert _short(method.request) == request, name
        assert _short(method.response) == response, name
        assert (method.kind is Kind.SERVER_STREAM) == (kind == "server-streaming"), name


def _short(cls: type[Message]) -> str:
    full = cls.DESCRIPTOR.full_name
    return full if full.startswith("google.protobuf.") else cls.DESCRIPTOR.name


def test_unknown_method_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown TaskHubSidecarService method 'Nope'; known: Hello, "):
        TASKHUB.method("Nope")


def test_paths_index() -> None:
    assert TASKHUB.paths["/TaskHubSidecarService/GetWorkItems"] is TASKHUB.method("GetWorkItems")


def test_method_is_frozen() -> None:
    method = TASKHUB.method("Hello")
    with pytest.raises(AttributeError):
        method.name = "Other"  # type: ignore[misc]
    assert isinstance(method, Method)


# ---------------------------------------------------------------------------------------------
# Clients against a tiny in-process server registered on the upstream paths
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def channel() -> Iterator[grpc.Channel]:
    seen: list[tuple[str, dict[str, str | bytes]]] = []

    def hello(request: Empty, context: grpc.ServicerContext) -> Empty:
        seen.append(("Hello", dict(context.invocation_metadata())))
        return Empty()

    def work_items(request: pb.GetWorkItemsRequest, context: grpc.ServicerContext) -> Iterator[pb.WorkItem]:
        for token in ("t1", "t2"):
            yield pb.WorkItem(completionToken=token, activityRequest=pb.ActivityRequest(name="echo"))

    def start(request: rt.StartWorkflowRequest, context: grpc.ServicerContext) -> rt.StartWorkflowResponse:
        return rt.StartWorkflowResponse(instance_id=request.instance_id or "generated")

    def handler(method: Method, behaviour) -> grpc.RpcMethodHandler:  # type: ignore[no-untyped-def]
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.kind is Kind.SERVER_STREAM
            else grpc.unary_unary_rpc_method_handler
        )
        return make(
            behaviour,
            request_deserializer=method.request.FromString,
            response_serializer=method.response.SerializeToString,
        )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                TASKHUB.name,
                {
                    "Hello": handler(TASKHUB.method("Hello"), hello),
                    "GetWorkItems": handler(TASKHUB.method("GetWorkItems"), work_items),
                },
            ),
            grpc.method_handlers_generic_handler(
                DAPR_WORKFLOW.name, {"StartWorkflowBeta1": handler(DAPR_WORKFLOW.method("StartWorkflowBeta1"), start)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        ch.seen = seen  # type: ignore[attr-defined]
        yield ch
    server.stop(grace=None)


def test_taskhub_client_unary_and_stream(channel: grpc.Channel) -> None:
    client = TaskHubClient(channel, metadata=[("dapr-api-token", "secret")])
    assert client.call("Hello", Empty(), timeout=5) == Empty()
    assert channel.seen[0][1]["dapr-api-token"] == "secret"  # type: ignore[attr-defined]

    items = list(client.stream("GetWorkItems", pb.GetWorkItemsRequest(), timeout=5))
    assert all(isinstance(item, pb.WorkItem) for item in items)
    assert [item.completionToken for item in items] == ["t1", "t2"]  # type: ignore[attr-defined]
    assert items[0].WhichOneof("request") == "activityRequest"


def test_dapr_workflow_client(channel: grpc.Channel) -> None:
    client = DaprWorkflowClient(channel)
    reply = client.call("StartWorkflowBeta1", rt.StartWorkflowRequest(instance_id="abc"), timeout=5)
    assert reply == rt.StartWorkflowResponse(instance_id="abc")


def test_client_rejects_wrong_kind_and_wrong_class(channel: grpc.Channel) -> None:
    client = TaskHubClient(channel)
    with pytest.raises(ValueError, match="GetWorkItems is server_stream; use stream"):
        client.call("GetWorkItems", pb.GetWorkItemsRequest())
    with pytest.raises(ValueError, match="Hello is unary; use call"):
        client.stream("Hello", Empty())
    with pytest.raises(
        TypeError, match="takes taskhub.dapr.v1.CreateInstanceRequest, got taskhub.dapr.v1.GetInstanceRequest"
    ):
        client.call("StartInstance", pb.GetInstanceRequest())
