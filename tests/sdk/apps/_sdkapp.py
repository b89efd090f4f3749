"""Shared plumbing for the SDK apps (dx_app.py, dd_app.py).

Runs inside an SDK's own virtualenv, so it may import only the standard library and grpc (every SDK
env has grpc). It owns: argument parsing, the one-JSON-line result contract, the per-case hard
timeout, polling, and a raw GetInstanceHistory call used for inspection only.

Result contract: stdout carries exactly one line, `{"case": ..., "ok": bool, "details": {...}}`.
Exit 0 whenever the case ran (even if it observed the wrong thing, or timed out: the details say
so), exit 2 on a usage error. Everything else the process writes goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TextIO, TypeVar

import grpc

T = TypeVar("T")

DEFAULT_CASE_TIMEOUT_S = 60.0


@dataclass
class CaseRun:
    """What a case function receives: where the sidecar is, and a place to put observations."""

    address: str
    case: str
    details: dict[str, Any] = field(default_factory=dict)
    # Steps reached so far; printed on a timeout so a hang says where it hung.
    steps: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> str:
        return self.address.rsplit(":", 1)[1]

    def step(self, name: str) -> None:
        self.steps.append(name)
        print(f"[{time.monotonic():.3f}] step: {name}", file=sys.stderr, flush=True)

    def new_id(self, suffix: str = "") -> str:
        # Unique per run, readable in sidecar logs.
        return f"{self.case}-{uuid.uuid4().hex[:8]}{suffix}"


CaseFn = Callable[[CaseRun], bool]


class _Emitter:
    """Prints the single result line at most once, from whichever thread gets there first."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._done = False

    def emit(self, *, case: str, ok: bool, details: Mapping[str, Any]) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
            line = json.dumps({"case": case, "ok": ok, "details": dict(details)}, default=str)
            self._out.write(line + "\n")
            self._out.flush()
            return True


def _parse_args(*, prog: str, cases: Mapping[str, CaseFn], argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description="Run one SDK conformance case.")
    parser.add_argument("--address", required=True, help="sidecar address HOST:PORT")
    parser.add_argument("--case", required=True, choices=sorted(cases))
    parser.add_argument("--timeout", type=float, default=DEFAULT_CASE_TIMEOUT_S)
    args = parser.parse_args(argv)  # exits 2 on a usage error
    host, sep, port = args.address.rpartition(":")
    if not sep or not host or not port.isdigit():
        parser.error(f"--address must be HOST:PORT, got {args.address!r}")
    return args


def main(*, sdk: str, cases: Mapping[str, CaseFn], argv: list[str] | None = None) -> None:
    """Parse arguments, run one case under a watchdog, print the result line, and exit.

    Ends with os._exit: the SDK workers keep non-daemon reader threads that must not be able to
    keep a finished (or timed-out) app alive.
    """
    args = _parse_args(prog=f"{sdk}_app", cases=cases, argv=sys.argv[1:] if argv is None else argv)
    real_stdout = sys.stdout
    # SDK code and our own diagnostics must never corrupt the result line.
    sys.stdout = sys.stderr
    emitter = _Emitter(real_stdout)
    run = CaseRun(address=args.address, case=args.case)
    run.details["sdk"] = sdk

    def on_timeout() -> None:
        details = dict(run.details)
        details["error"] = f"case timed out after {args.timeout:.0f} s"
        details["steps"] = list(run.steps)
        if emitter.emit(case=args.case, ok=False, details=details):
            print(f"{sdk}_app: timeout in case {args.case}; steps: {run.steps}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(0)

    watchdog = threading.Timer(args.timeout, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    try:
        ok = bool(cases[args.case](run))
    except BaseException as exc:  # noqa: BLE001 - any failure is an observation to report
        traceback.print_exc(file=sys.stderr)
        run.details["error"] = f"{type(exc).__name__}: {exc}"
        ok = False
    watchdog.cancel()
    run.details["steps"] = list(run.steps)
    emitter.emit(case=args.case, ok=ok, details=run.details)
    sys.stderr.flush()
    os._exit(0)


def poll(
    fn: Callable[[], T], *, until: Callable[[T], bool], timeout: float, interval: float = 0.1
) -> T:
    """Call fn until until(result) holds or timeout passes; return the last result either way."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if until(value) or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def rpc_error_text(exc: BaseException) -> str:
    """`CODE: details` for a grpc.RpcError, else the exception's repr."""
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else None
        return f"{getattr(code, 'name', code)}: {details}"
    return f"{type(exc).__name__}: {exc}"


# --- raw GetInstanceHistory (inspection only) -------------------------------------------------
# Neither dd's proto nor the SDK clients expose GetInstanceHistory, so the request is encoded by
# hand (GetInstanceHistoryRequest{instanceId = 1}) and the response split into its repeated
# HistoryEvent (field 1) payloads, which the caller decodes with the SDK's own HistoryEvent class.


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _split_repeated_field1(buf: bytes) -> list[bytes]:
    items: list[bytes] = []
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _read_varint(buf, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = _read_varint(buf, pos)
            if number == 1:
                items.append(buf[pos : pos + length])
            pos += length
        else:
            raise ValueError(f"unexpected wire type {wire_type} in GetInstanceHistoryResponse")
    return items


def raw_history(*, address: str, instance_id: str, timeout: float = 10.0) -> list[bytes]:
    """GetInstanceHistory(instance_id) on the sidecar; returns the serialized HistoryEvents."""
    encoded_id = instance_id.encode()
    request = b"\x0a" + _varint(len(encoded_id)) + encoded_id
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(
            "/TaskHubSidecarService/GetInstanceHistory",
            request_serializer=lambda raw: raw,
            response_deserializer=lambda raw: raw,
        )
        response: bytes = call(request, timeout=timeout)
    return _split_repeated_field1(response)


def stalled_events(
    *, address: str, instance_id: str, parse_event: Callable[[bytes], Any]
) -> list[dict[str, Any]]:
    """The executionStalled events in the instance's history, as {reason, description} dicts."""
    found: list[dict[str, Any]] = []
    for raw in raw_history(address=address, instance_id=instance_id):
        event = parse_event(raw)
        if event.WhichOneof("eventType") != "executionStalled":
            continue
        stalled = event.executionStalled
        reason_enum = stalled.DESCRIPTOR.fields_by_name["reason"].enum_type
        reason = reason_enum.values_by_number.get(stalled.reason)
        found.append(
            {
                "reason": reason.name if reason is not None else stalled.reason,
                "description": stalled.description,
            }
        )
    return found


def history_kinds(
    *, address: str, instance_id: str, parse_event: Callable[[bytes], Any]
) -> list[str]:
    """The oneof names of the instance's history events, in order (for failure messages)."""
    return [
        str(parse_event(raw).WhichOneof("eventType"))
        for raw in raw_history(address=address, instance_id=instance_id)
    ]
