"""Completion attestations of a signing engine (daprd with WorkflowHistorySigning and mTLS).

Each activity and child completion in the instance's history carries an attestation whose payload
commits to that call: parent instance, the task's id, the activity's name, the digest of the call's
input and output in the canonical form (taskhub_wire.attestation, pinned by the golden vectors),
the terminal status and the spec version. The signer's certificate travels with the completion
only until the orchestrator has verified it; the stored history has it stripped. Sources, dapr
v1.18.2: pkg/actors/targets/workflow/orchestrator/signing/attach.go:41-78 (child) and :97-137
(activity) build and attach them; signing/verify.go:64, 81, 98, 115 strip the certificate.
"""

from __future__ import annotations

from typing import Any

from taskhub_wire import attestation as canon
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind

from conformance.checks.base import FlowObservation, check, fail
from conformance.verdict import Mismatch, MismatchKind, Subject

REQUIREMENT = "HIST-ATTEST-001"
_DIGEST_BYTES = 32  # sha256

# completion event field -> (scheduling event field, payload message, its COMPLETED and FAILED statuses)
_ACTIVITY = (pb.ActivityCompletionAttestationPayload, pb.ACTIVITY_TERMINAL_STATUS_COMPLETED,
             pb.ACTIVITY_TERMINAL_STATUS_FAILED)
_CHILD = (pb.ChildCompletionAttestationPayload, pb.TERMINAL_STATUS_COMPLETED, pb.TERMINAL_STATUS_FAILED)
_COMPLETIONS = {
    EventKind.TASK_COMPLETED.field: (EventKind.TASK_SCHEDULED.field, _ACTIVITY, False),
    EventKind.TASK_FAILED.field: (EventKind.TASK_SCHEDULED.field, _ACTIVITY, True),
    EventKind.CHILD_WORKFLOW_INSTANCE_COMPLETED.field: (EventKind.CHILD_WORKFLOW_INSTANCE_CREATED.field, _CHILD, False),
    EventKind.CHILD_WORKFLOW_INSTANCE_FAILED.field: (EventKind.CHILD_WORKFLOW_INSTANCE_CREATED.field, _CHILD, True),
}
_SCHEDULING = frozenset(opening for opening, _, _ in _COMPLETIONS.values())


def _failure(details: Any) -> canon.Failure:
    inner = _failure(details.innerFailure) if details.HasField("innerFailure") else None
    return canon.Failure(error_type=details.errorType, error_message=details.errorMessage,
                         stack_trace=details.stackTrace.value if details.HasField("stackTrace") else None, inner=inner)


def _value(msg: Any, name: str) -> str | None:
    return getattr(msg, name).value if msg.HasField(name) else None


def attestation_breaks(instance_id: str, history: list[Any]) -> list[str]:
    """What is wrong with the attestations of one history (pb.HistoryEvent list), as lines."""
    scheduled = {e.eventId: e for e in history if e.WhichOneof("eventType") in _SCHEDULING}
    out: list[str] = []
    for i, event in enumerate(history):
        kind = event.WhichOneof("eventType")
        if kind not in _COMPLETIONS:
            continue
        sched_kind, (payload_type, ok_status, failed_status), failed = _COMPLETIONS[kind]
        body = getattr(event, kind)
        where = f"event #{i} {kind} (taskScheduledId {body.taskScheduledId})"
        if not body.HasField("attestation") or not body.attestation.payload or not body.attestation.signature:
            out.append(f"{where}: no attestation with a payload and a signature")
            continue
        if body.HasField("signerCertificate"):
            out.append(f"{where}: signerCertificate is still there ({len(body.signerCertificate)} bytes); the "
                       "stored history has it stripped once verified")
        origin = scheduled.get(body.taskScheduledId)
        if origin is None or origin.WhichOneof("eventType") != sched_kind:
            out.append(f"{where}: no {sched_kind} with eventId {body.taskScheduledId} to attest against")
            continue
        sched = getattr(origin, sched_kind)
        payload = payload_type()
        payload.ParseFromString(body.attestation.payload)
        output = canon.canonical_failure(_failure(body.failureDetails)) if failed else \
            canon.canonical_value(_value(body, "result"))
        want = {"parentInstanceId": instance_id, "parentTaskScheduledId": body.taskScheduledId,
                "ioDigest": canon.io_digest(canon.canonical_value(_value(sched, "input")), output),
                "terminalStatus": failed_status if failed else ok_status,
                "canonicalSpecVersion": canon.CANONICAL_SPEC_VERSION}
        if kind.startswith("task"):
            want["activityName"] = sched.name
        for field, value in want.items():
            got = getattr(payload, field)
            if got != value:
                show = (lambda v: v.hex()) if isinstance(value, bytes) else repr
                out.append(f"{where}: attestation payload {field} {show(got)}, expected {show(value)}")
        if len(payload.signerCertDigest) != _DIGEST_BYTES:
            out.append(f"{where}: attestation payload signerCertDigest has {len(payload.signerCertDigest)} bytes, "
                       f"expected a sha256 ({_DIGEST_BYTES})")
    return out


@check("completion_attestations")
def completion_attestations(obs: FlowObservation) -> None:
    """Every completion in each instance's history is attested for exactly that call."""
    out = [Mismatch(text=f"{iid} {line}", requirement=REQUIREMENT, subject=Subject.HISTORY, instance=iid,
                    kind=MismatchKind.RULE)
           for iid, raw in obs.raw_histories.items() for line in attestation_breaks(iid, list(raw))]
    if not any(e.WhichOneof("eventType") in _COMPLETIONS for raw in obs.raw_histories.values() for e in raw):
        out.append(Mismatch(text="no activity or child completion in any history: nothing was attested",
                            requirement=REQUIREMENT, subject=Subject.HISTORY, kind=MismatchKind.MISSING))
    fail(obs, "completion_attestations", out)
