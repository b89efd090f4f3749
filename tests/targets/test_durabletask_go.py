"""The durabletask-go launcher and the process helpers under it.

The dtgo tests need .tools/bin/durabletask-go (scripts/install-durabletask-go.sh). Without it they
fail with the install hint rather than skip, so that CI cannot go green without the engine.
"""

from __future__ import annotations

import signal
import socket
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from conformance.targets.durabletask_go import (
    DurableTaskGoNotInstalledError,
    DurableTaskGoSidecar,
    RunningSidecar,
)
from conformance.targets.process import (
    HELLO_METHOD,
    ManagedProcess,
    ProcessExitedError,
    ProcessSpec,
    free_port,
)


def _start_sidecar(tmp_path: Path) -> RunningSidecar:
    # Started in the test body, not a fixture, so that a missing binary is a test FAILURE.
    try:
        return DurableTaskGoSidecar().start(db_path=tmp_path / "dt.sqlite3", log_dir=tmp_path / "logs")
    except DurableTaskGoNotInstalledError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def _unary(address: str, method: str, request: bytes) -> bytes:
    with grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)]) as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        return bytes(call(request, timeout=10))


# The requests below are hand-encoded so that these launcher tests do not depend on taskhub_wire.
def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2); payloads here are < 128 bytes."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _instance_exists(address: str, instance_id: str) -> bool:
    # GetInstanceRequest{instanceId=1}; GetInstanceResponse{exists=1 (bool)} is serialised first.
    response = _unary(address, "/TaskHubSidecarService/GetInstance",
                      _field(1, instance_id.encode()))
    return response.startswith(b"\x08\x01")


def _process_gone(pid: int) -> bool:
    """True if pid is gone, a zombie, or now belongs to an unrelated process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z" or b"durabletask-go" not in cmdline


@pytest.mark.dtgo
def test_starts_answers_hello_and_stops_by_pid(tmp_path: Path) -> None:
    with _start_sidecar(tmp_path) as sidecar:
        assert sidecar.address == f"127.0.0.1:{sidecar.port}" and sidecar.port > 0
        assert sidecar.version  # from the install script's stamp file
        assert _unary(sidecar.address, HELLO_METHOD, b"") == b""
        pid = sidecar.pid

        assert sidecar.stop() == -signal.SIGTERM
        assert _process_gone(pid)
        with pytest.raises(grpc.RpcError) as err:
            _unary(sidecar.address, HELLO_METHOD, b"")
        assert isinstance(err.value, grpc.Call)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.dtgo
def test_kill_and_restart_keep_the_database(tmp_path: Path) -> None:
    with _start_sidecar(tmp_path) as sidecar:
        instance_id = f"dtgo-{uuid.uuid4()}"
        # A scheduled start makes StartInstance return at once instead of waiting for a worker to
        # run the first turn: CreateInstanceRequest{instanceId=1, name=2, scheduledStartTimestamp=5}.
        later = Timestamp(seconds=int(time.time()) + 3600).SerializeToString()
        _unary(sidecar.address, "/TaskHubSidecarService/StartInstance",
               _field(1, instance_id.encode()) + _field(2, b"wf") + _field(5, later))
        assert _instance_exists(sidecar.address, instance_id)
        old_pid, old_address = sidecar.pid, sidecar.address

        assert sidecar.kill() == -signal.SIGKILL
        assert _process_gone(old_pid)
        sidecar.restart()

        assert sidecar.pid != old_pid
        assert sidecar.address == old_address  # the port is reused unless someone took it meanwhile
        assert _instance_exists(sidecar.address, instance_id)
        assert not _instance_exists(sidecar.address, f"dtgo-{uuid.uuid4()}")
        assert len(list(sidecar.log_dir.glob("durabletask-go-*.stdout.log"))) == 2


@pytest.mark.dtgo
def test_missing_binary_says_how_to_install(tmp_path: Path) -> None:
    launcher = DurableTaskGoSidecar(binary=tmp_path / "nowhere" / "durabletask-go")
    with pytest.raises(DurableTaskGoNotInstalledError, match="scripts/install-durabletask-go.sh"):
        launcher.start(db_path=None, log_dir=tmp_path)


def _python(tmp_path: Path, code: str) -> ProcessSpec:
    return ProcessSpec(name="py", argv=(sys.executable, "-c", code), log_dir=tmp_path)


def test_exit_before_ready_line_reports_code_and_stderr(tmp_path: Path) -> None:
    code = "import sys; print('not ready'); print('boom: port taken', file=sys.stderr); sys.exit(3)"
    with ManagedProcess.start(spec=_python(tmp_path, code)) as proc:
        with pytest.raises(ProcessExitedError, match=r"(?s)exited with code 3.*boom: port taken") as err:
            proc.wait_for_line("ready at", timeout=10)
        assert err.value.returncode == 3


def test_stop_escalates_to_sigkill_and_kills_children(tmp_path: Path) -> None:
    # The parent ignores SIGTERM, so stop() must escalate; its child must die with it.
    code = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print('child', c.pid, flush=True); time.sleep(60)")
    proc = ManagedProcess.start(spec=_python(tmp_path, code))
    child_pid = int(proc.wait_for_line(r"child (\d+)", timeout=10)[1])

    assert proc.stop(timeout=0.5) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while not _gone_or_zombie(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone_or_zombie(child_pid)


def _gone_or_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
