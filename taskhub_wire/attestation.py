"""The canonical bytes of daprd's completion attestations (history signing, spec version 1).

daprd (with the WorkflowHistorySigning feature and mTLS) attaches to an activity's or a child's
completion an attestation: a signed payload message that commits to the invocation's input and
output through `ioDigest`. The bytes that go into that digest are a canonical form independent of
protobuf encoding, defined by durabletask-go's `backend/historysigning/attestation.go` (the revision
daprd v1.18.2 builds with) and the spec block of its `attestation.proto`:

- strings are NFC-normalised UTF-8; an unset input or output is zero bytes;
- a FAILED output is `len32be(errorType) errorType len32be(errorMessage) errorMessage
  len32be(stackTrace) stackTrace` then `0x01` and the inner failure the same way, or `0x00`;
- `ioDigest = sha256(u64be(len(input)) input u64be(len(output)) output)`;
- the payload is the deterministic protobuf encoding of the *Payload message, and the signature
  covers `sha256(payload)`; `signerCertDigest = sha256(DER certificate chain)`.

The golden vectors (tests/wire/attestation_vectors.json) pin these bytes; scripts/attestation-vectors
computes the same vectors with daprd's own Go code, and tests/wire/test_attestation_vectors.py holds
the two against each other. Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
import struct
import unicodedata
from dataclasses import dataclass

from taskhub_wire import pb

CANONICAL_SPEC_VERSION = 1
MAX_FAILURE_DEPTH = 32  # deeper innerFailure chains are refused, as upstream


class AttestationError(ValueError):
    """An input the canonical form refuses (an innerFailure chain deeper than MAX_FAILURE_DEPTH)."""


def canonical_string(text: str) -> bytes:
    return unicodedata.normalize("NFC", text).encode("utf-8")


def canonical_value(value: str | None) -> bytes:
    """An input or a COMPLETED output (a StringValue): its NFC bytes, or nothing when unset."""
    return b"" if value is None else canonical_string(value)


@dataclass(frozen=True, kw_only=True)
class Failure:
    """The fields of TaskFailureDetails the canonical form reads."""

    error_type: str = ""
    error_message: str = ""
    stack_trace: str | None = None
    inner: Failure | None = None


def canonical_failure(failure: Failure | None) -> bytes:
    """A FAILED output; None serialises as a failure with every field empty."""
    out = bytearray()
    node, depth = failure or Failure(), 0
    while True:
        if depth >= MAX_FAILURE_DEPTH:
            raise AttestationError(f"innerFailure chain deeper than {MAX_FAILURE_DEPTH}")
        for text in (node.error_type, node.error_message, node.stack_trace or ""):
            data = canonical_string(text)
            out += struct.pack(">I", len(data)) + data
        if node.inner is None:
            out.append(0)
            return bytes(out)
        out.append(1)
        node, depth = node.inner, depth + 1


def io_digest(input_bytes: bytes, output_bytes: bytes) -> bytes:
    return hashlib.sha256(struct.pack(">Q", len(input_bytes)) + input_bytes
                          + struct.pack(">Q", len(output_bytes)) + output_bytes).digest()


def cert_digest(cert_chain_der: bytes) -> bytes:
    return hashlib.sha256(cert_chain_der).digest()


def signature_input(payload: bytes) -> bytes:
    """What the signer signs: sha256 of the payload bytes."""
    return hashlib.sha256(payload).digest()


def activity_payload(*, parent_instance_id: str, task_scheduled_id: int, activity_name: str, io: bytes,
                     signer_cert_digest: bytes, status: int) -> bytes:
    """The deterministic encoding of ActivityCompletionAttestationPayload."""
    msg = pb.ActivityCompletionAttestationPayload(
        parentInstanceId=parent_instance_id, parentTaskScheduledId=task_scheduled_id, activityName=activity_name,
        ioDigest=io, signerCertDigest=signer_cert_digest, terminalStatus=status,
        canonicalSpecVersion=CANONICAL_SPEC_VERSION)
    return msg.SerializeToString(deterministic=True)


def child_payload(*, parent_instance_id: str, task_scheduled_id: int, io: bytes, signer_cert_digest: bytes,
                  status: int) -> bytes:
    """The deterministic encoding of ChildCompletionAttestationPayload."""
    msg = pb.ChildCompletionAttestationPayload(
        parentInstanceId=parent_instance_id, parentTaskScheduledId=task_scheduled_id, ioDigest=io,
        signerCertDigest=signer_cert_digest, terminalStatus=status, canonicalSpecVersion=CANONICAL_SPEC_VERSION)
    return msg.SerializeToString(deterministic=True)
