"""The check completion_attestations (conformance/checks/signing.py) on an attestation daprd wrote.

PAYLOAD is the attestation payload of the first TaskCompleted of activities/chain as daprd v1.18.2
delivered it on the daprd-mtls target with history signing on (instance main-chain-a91d87, activity
echo, input and result '"a"'). The check must accept it as daprd wrote it and name each field that
does not fit the call it is held against.
"""

from __future__ import annotations

import base64

from taskhub_wire import pb

from conformance.checks.signing import attestation_breaks

PAYLOAD = base64.b64decode("ChFtYWluLWNoYWluLWE5MWQ4NxABGgRlY2hvIiDCPqReokwLRzvLPJVpL4YrbfKSzdaVtjxNc1d0F+nIfSog"
                           "larsn36RmeZ82OUWFtN/L6NqqFtE1mJM5F34jD67bGswATgB")
IID = "main-chain-a91d87"


def _history(*, name: str = "echo", input: str = '"a"', result: str = '"a"', attested: bool = True,
             certificate: bytes | None = None) -> list[pb.HistoryEvent]:
    scheduled = pb.HistoryEvent(eventId=1)
    scheduled.taskScheduled.name = name
    scheduled.taskScheduled.input.value = input
    completed = pb.HistoryEvent(eventId=-1)
    completed.taskCompleted.taskScheduledId = 1
    completed.taskCompleted.result.value = result
    if attested:
        completed.taskCompleted.attestation.payload = PAYLOAD
        completed.taskCompleted.attestation.signature = bytes(64)
    if certificate is not None:
        completed.taskCompleted.signerCertificate = certificate
    return [scheduled, completed]


def test_daprd_attestation_fits_its_call() -> None:
    assert attestation_breaks(IID, _history()) == []


def test_each_field_that_does_not_fit_is_named() -> None:
    assert [b.split(": ", 1)[1].split(" ", 3)[2] for b in attestation_breaks("other", _history(name="x"))] == \
        ["parentInstanceId", "activityName"]
    [digest] = attestation_breaks(IID, _history(result='"b"'))
    assert "ioDigest" in digest
    [digest] = attestation_breaks(IID, _history(input='"b"'))
    assert "ioDigest" in digest


def test_missing_attestation_and_kept_certificate_are_breaks() -> None:
    [missing] = attestation_breaks(IID, _history(attested=False))
    assert "no attestation" in missing
    [kept] = attestation_breaks(IID, _history(certificate=b"der"))
    assert "signerCertificate is still there" in kept
