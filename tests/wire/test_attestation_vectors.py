"""The attestation canonical form (taskhub_wire/attestation.py) gives the golden vectors' bytes.

tests/wire/attestation_vectors.json pins, per case, the canonical input and output bytes, the
ioDigest, the deterministic payload encoding and the bytes a signer signs. The same file is checked
against daprd's own Go code in tests/engines/test_attestation_vectors_daprd.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from taskhub_wire import pb
from taskhub_wire.attestation import (
    AttestationError, Failure, activity_payload, canonical_failure, canonical_value, cert_digest, child_payload,
    io_digest, signature_input,
)

VECTORS = Path(__file__).with_name("attestation_vectors.json")


def vectors() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))["vectors"]


def _failure(raw: dict[str, Any] | None) -> Failure | None:
    if raw is None:
        return None
    return Failure(error_type=raw["type"], error_message=raw["message"], stack_trace=raw["stack"],
                   inner=_failure(raw["inner"]))


def _chain(depth: int) -> Failure | None:
    node = None
    for i in range(depth):
        node = Failure(error_type="E", error_message=str(i), inner=node)
    return node


def computed(case: dict[str, Any]) -> dict[str, str]:
    """What taskhub_wire.attestation makes of one case, in the vectors' layout."""
    inp = canonical_value(case["input"])
    try:
        if case["status"] == "COMPLETED":
            out = canonical_value(case["output"])
        else:
            out = canonical_failure(_chain(case["failure_depth"]) if case["failure_depth"]
                                    else _failure(case["failure"]))
    except AttestationError:
        return {"error": "failure chain too deep"}
    io = io_digest(inp, out)
    signer = cert_digest(bytes.fromhex(case["cert_chain_hex"]))
    failed = case["status"] == "FAILED"
    if case["kind"] == "activity":
        payload = activity_payload(
            parent_instance_id=case["parent_instance_id"], task_scheduled_id=case["task_scheduled_id"],
            activity_name=case["activity_name"], io=io, signer_cert_digest=signer,
            status=pb.ACTIVITY_TERMINAL_STATUS_FAILED if failed else pb.ACTIVITY_TERMINAL_STATUS_COMPLETED)
    else:
        payload = child_payload(
            parent_instance_id=case["parent_instance_id"], task_scheduled_id=case["task_scheduled_id"], io=io,
            signer_cert_digest=signer, status=pb.TERMINAL_STATUS_FAILED if failed else pb.TERMINAL_STATUS_COMPLETED)
    return {"input_hex": inp.hex(), "output_hex": out.hex(), "io_digest_hex": io.hex(), "payload_hex": payload.hex(),
            "signature_input_hex": signature_input(payload).hex()}


@pytest.mark.parametrize("case", vectors(), ids=lambda c: c["name"])
def test_the_canonical_form_gives_the_golden_bytes(case: dict[str, Any]) -> None:
    assert computed(case) == case["expected"]


def test_nfc_and_unset_values_are_what_the_vectors_say() -> None:
    by_name = {c["name"]: c for c in vectors()}
    assert canonical_value("e\u0301") == canonical_value("\u00e9") == "\u00e9".encode()
    assert by_name["activity-unset-input-equals-empty"]["expected"]["input_hex"] == ""
    assert canonical_value(None) == canonical_value("") == b""
    # an unset stack trace and an empty one serialise the same (a zero length)
    assert canonical_failure(Failure(error_type="T", stack_trace=None)) == canonical_failure(
        Failure(error_type="T", stack_trace=""))
    assert canonical_failure(None) == bytes(12) + b"\x00"
    assert by_name["child-failed-depth-33-refused"]["expected"] == {"error": "failure chain too deep"}


def test_a_changed_byte_changes_the_digest() -> None:
    case = dict(vectors()[0])
    case["input"] = case["input"] + " "
    assert computed(case)["io_digest_hex"] != vectors()[0]["expected"]["io_digest_hex"]
