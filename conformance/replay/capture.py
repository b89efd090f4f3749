"""`conformance capture`: export instance histories from any engine that serves
TaskHubSidecarService (daprd, durabletask-go, the reference sidecar) to history files.

Reads only: ListInstanceIDs (paged) to find instances, GetInstance for their metadata,
GetInstanceHistory for their events. Nothing on the engine changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

from conformance.replay import history

RPC_TIMEOUT_S = 30.0
PAGE_SIZE = 500


class CaptureError(Exception):
    """The engine could not be read; the message says which call failed and what to check."""


@dataclass(frozen=True, kw_only=True)
class Selection:
    """Which instances to export: ids given, every instance, or every instance with a status."""

    instance_ids: tuple[str, ...] = ()
    status: str | None = None  # e.g. "RUNNING"
    all: bool = False


@dataclass(frozen=True, kw_only=True)
class CaptureResult:
    written: tuple[Path, ...]
    skipped: tuple[tuple[str, str], ...]  # (instance id, why)


def parse_status(text: str) -> int:
    name = text.strip().upper().removeprefix("ORCHESTRATION_STATUS_")
    try:
        return pb.OrchestrationStatus.Value("ORCHESTRATION_STATUS_" + name)
    except ValueError:
        known = ", ".join(n.removeprefix("ORCHESTRATION_STATUS_") for n in pb.OrchestrationStatus.keys())
        raise ValueError(f"unknown status {text!r}; known: {known}") from None


def _call(client: TaskHubClient, method: str, req, *, address: str, what: str):
    try:
        return client.call(method, req, timeout=RPC_TIMEOUT_S)
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
        hint = {
            grpc.StatusCode.UNAVAILABLE: "is the engine running there and is the address its gRPC port?",
            grpc.StatusCode.UNAUTHENTICATED: "pass the engine's API token with --api-token",
            grpc.StatusCode.UNIMPLEMENTED: "this engine does not serve it; export instances one by one with "
                                           "--instance ID",
        }.get(code, "see the engine's log")
        raise CaptureError(f"{method} ({what}) on {address} failed: {getattr(code, 'name', code)}: {details}; "
                           f"{hint}") from None


def instance_ids(client: TaskHubClient, *, address: str) -> Iterator[str]:
    """Every instance id, following continuation tokens (engines without paging answer one page)."""
    token: str | None = None
    seen_tokens: set[str] = set()
    while True:
        req = pb.ListInstanceIDsRequest(pageSize=PAGE_SIZE)
        if token is not None:
            req.continuationToken = token
        resp = _call(client, "ListInstanceIDs", req, address=address, what="listing instances")
        yield from resp.instanceIds
        if not resp.HasField("continuationToken") or not resp.continuationToken:
            return
        if resp.continuationToken in seen_tokens:
            raise CaptureError(f"ListInstanceIDs on {address} returned the continuation token "
                               f"{resp.continuationToken!r} twice; the engine's paging is broken")
        seen_tokens.add(resp.continuationToken)
        token = resp.continuationToken


def capture(*, address: str, selection: Selection, out_dir: Path, api_token: str | None = None,
            on_written: Callable[[Path, history.CapturedHistory], None] | None = None) -> CaptureResult:
    metadata = (("dapr-api-token", api_token),) if api_token else ()
    want_status = parse_status(selection.status) if selection.status else None
    with grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)]) as channel:
        client = TaskHubClient(channel, metadata=metadata)
        ids: Sequence[str] | Iterator[str]
        if selection.instance_ids:
            ids = selection.instance_ids
        else:
            ids = instance_ids(client, address=address)
        written: list[Path] = []
        skipped: list[tuple[str, str]] = []
        for iid in ids:
            got = _call(client, "GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True),
                        address=address, what=f"instance {iid!r}")
            if not got.exists:
                if selection.instance_ids:
                    skipped.append((iid, "no such instance"))
                continue
            if want_status is not None and got.workflowState.workflowStatus != want_status:
                continue
            state = pb.WorkflowState()
            state.CopyFrom(got.workflowState)
            if not state.instanceId:
                state.instanceId = iid
            events = _call(client, "GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid),
                           address=address, what=f"history of {iid!r}").events
            if not events:
                skipped.append((iid, "the engine returned an empty history (purged, or not started yet)"))
                continue
            h = history.make(state=state, events=list(events), source=address)
            path = history.write(h, out_dir)
            written.append(path)
            if on_written is not None:
                on_written(path, h)
    return CaptureResult(written=tuple(written), skipped=tuple(skipped))
