"""The `python -m fake_sidecar` command: its ready line, signals, and how it refuses bad input.

Every process is started with `--port 0` (or a port this test holds) and a db under tmp_path,
and is ended by pid (SIGTERM, then SIGKILL if it does not go).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"listening on 127\.0\.0\.1:(\d+)\n")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DAPR_API_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


class Sidecar:
    """One child process; `ready()` waits for its line on stdout."""

    def __init__(self, *args: str) -> None:
        self.popen = subprocess.Popen([sys.executable, "-m", "fake_sidecar", *args], cwd=REPO, env=_env(),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout: queue.Queue[str | None] = queue.Queue()
        self.out_lines: list[str] = []
        self.err_chunks: list[str] = []
        self._pumps = [threading.Thread(target=self._pump_out, daemon=True),
                       threading.Thread(target=self._pump_err, daemon=True)]
        for t in self._pumps:
            t.start()

    def _pump_out(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.out_lines.append(line)
            self.stdout.put(line)
        self.stdout.put(None)

    def _pump_err(self) -> None:
        assert self.popen.stderr is not None
        for chunk in self.popen.stderr:
            self.err_chunks.append(chunk)

    @property
    def stderr(self) -> str:
        return "".join(self.err_chunks)

    def ready(self, timeout: float = 30.0) -> int:
        try:
            line = self.stdout.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no ready line within {timeout}s; stderr: {self.stderr[-2000:]}") from None
        assert line is not None, f"exited ({self.popen.wait(5)}) before it was ready; stderr: {self.stderr[-2000:]}"
        m = READY.fullmatch(line)
        assert m, f"unexpected first line {line!r}"
        return int(m.group(1))

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for exit (the process is expected to end by itself) and for its output to drain."""
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"did not exit within {timeout}s; stderr: {self.stderr[-2000:]}") from None
        for t in self._pumps:  # the pipes reach EOF once the process is gone
            t.join(timeout=5)
        return rc

    def signal(self, sig: int) -> None:
        os.kill(self.popen.pid, sig)

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)


@pytest.fixture
def spawn() -> Iterator:
    procs: list[Sidecar] = []

    def _spawn(*args: str) -> Sidecar:
        proc = Sidecar(*args)
        procs.append(proc)
        return proc

    try:
        yield _spawn
    finally:
        for proc in procs:
            if proc.popen.poll() is None:
                proc.signal(signal.SIGTERM)
                try:
                    proc.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _hello(port: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        TaskHubClient(channel).call("Hello", empty_pb2.Empty(), timeout=5)


def _base(tmp_path: Path) -> list[str]:
    return ["--host", "127.0.0.1", "--port", "0", "--db", str(tmp_path / "s.db")]


def test_prints_one_ready_line_and_serves_on_a_real_port(spawn, tmp_path: Path) -> None:
    proc = spawn(*_base(tmp_path))
    port = proc.ready()
    assert 0 < port < 65536
    _hello(port)
    assert (tmp_path / "s.db").exists(), "the --db file was not created"
    proc.signal(signal.SIGTERM)
    assert proc.finish() == 0
    assert len(proc.out_lines) == 1, f"stdout must hold exactly the ready line, got {proc.out_lines!r}"
    assert "Traceback" not in proc.stderr, proc.stderr


def test_debug_logging_stays_off_stdout(spawn, tmp_path: Path) -> None:
    proc = spawn(*_base(tmp_path), "--log-level", "DEBUG")
    port = proc.ready()
    _hello(port)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        TaskHubClient(channel).call("GetInstance", pb.GetInstanceRequest(instanceId="nope"), timeout=5)
    proc.signal(signal.SIGTERM)
    assert proc.finish() == 0
    assert len(proc.out_lines) == 1, proc.out_lines


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_gracefully(spawn, tmp_path: Path, sig: int) -> None:
    proc = spawn(*_base(tmp_path))
    port = proc.ready()
    _hello(port)
    proc.signal(sig)
    # A deadline for a hang, not a timing assertion: SidecarServer.stop bounds each of its waits.
    assert proc.finish(timeout=60) == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    with pytest.raises(grpc.RpcError) as err:
        _hello(port)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_sigterm_with_an_open_stream_and_a_blocked_call(spawn, tmp_path: Path) -> None:
    """Shutdown ends the worker stream with CANCELLED (R5.6) and still exits 0 promptly."""
    proc = spawn(*_base(tmp_path))
    port = proc.ready()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = TaskHubClient(channel)
    try:
        stream = client.stream("GetWorkItems", pb.GetWorkItemsRequest())

        def start_held() -> None:  # its first turn is never answered, so the call may end either way
            try:
                client.call("StartInstance", pb.CreateInstanceRequest(instanceId="held", name="W"), timeout=30)
            except grpc.RpcError:
                pass

        threading.Thread(target=start_held, daemon=True).start()
        # A work item on the stream: the server has registered it, so the shutdown must be what ends it.
        assert next(stream).workflowRequest.instanceId == "held"
        outcome: queue.Queue[object] = queue.Queue()

        def read() -> None:
            try:
                outcome.put(list(stream))
            except grpc.RpcError as exc:
                outcome.put(exc)

        threading.Thread(target=read, daemon=True).start()
        waiter: queue.Queue[object] = queue.Queue()

        def wait_held() -> None:
            try:
                waiter.put(client.call("WaitForInstanceCompletion", pb.GetInstanceRequest(instanceId="held"),
                                       timeout=30))
            except grpc.RpcError as exc:
                waiter.put(exc)

        # Whether this call reaches the server before the signal or not, it must end at once: CANCELLED
        # if it did, UNAVAILABLE if it did not (asserted below), never after its 30 s deadline.
        threading.Thread(target=wait_held, daemon=True).start()
        proc.signal(signal.SIGTERM)
        assert proc.finish(timeout=60) == 0, proc.stderr  # a deadline for a hang (see above)
        ended = outcome.get(timeout=10)
        assert isinstance(ended, grpc.RpcError), f"the stream ended without a status: {ended!r}"
        assert ended.code() == grpc.StatusCode.CANCELLED, (ended.code(), ended.details())
        blocked = waiter.get(timeout=10)
        assert isinstance(blocked, grpc.RpcError)
        assert blocked.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE), blocked.code()
        assert "Traceback" not in proc.stderr, proc.stderr
    finally:
        channel.close()


@pytest.mark.parametrize("args,flag", [
    (["--port", "abc"], "--port"),
    (["--port", "70000"], "--port"),
    (["--port", "-5"], "--port"),
    (["--clock", "sundial"], "--clock"),
    (["--max-payload", "-1"], "--max-payload"),
    (["--max-payload", "0"], "--max-payload"),
    (["--max-payload", "lots"], "--max-payload"),
    (["--activity-lease", "0"], "--activity-lease"),
    (["--activity-lease", "-3"], "--activity-lease"),
    (["--activity-lease", "soon"], "--activity-lease"),
    (["--log-level", "LOUD"], "--log-level"),
    (["--no-such-flag"], "--no-such-flag"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_flags_exit_2_naming_the_flag(spawn, tmp_path: Path, args: list[str], flag: str) -> None:
    proc = spawn("--host", "127.0.0.1", "--port", "0", "--db", str(tmp_path / "s.db"), *args)
    assert proc.finish() == 2, proc.stderr
    assert flag in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.out_lines == [], "nothing may be printed on stdout when refusing to start"
    assert not (tmp_path / "s.db").exists(), "the db was created although the flags were refused"


def _assert_clear_refusal(proc: Sidecar, code: int | None, *needles: str) -> None:
    rc = proc.finish()
    if code is None:
        assert rc != 0, proc.stderr
    else:
        assert rc == code, (rc, proc.stderr)
    assert proc.out_lines == [], proc.out_lines
    err = proc.stderr
    assert "Traceback" not in err, f"a traceback instead of a message:\n{err}"
    assert err.strip(), "no message on stderr"
    assert len(err.strip().splitlines()) <= 3, f"expected a short message, got:\n{err}"
    for needle in needles:
        assert needle in err, (needle, err)


def test_db_in_a_missing_directory(spawn) -> None:
    proc = spawn("--host", "127.0.0.1", "--port", "0", "--db", "/nonexistent/dir/x.db")
    _assert_clear_refusal(proc, 2, "/nonexistent/dir", "--db")


def test_db_that_is_a_directory(spawn, tmp_path: Path) -> None:
    proc = spawn("--host", "127.0.0.1", "--port", "0", "--db", str(tmp_path))
    _assert_clear_refusal(proc, 2, str(tmp_path))


def test_db_that_is_not_a_database(spawn, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not an sqlite database\n" * 200)
    proc = spawn("--host", "127.0.0.1", "--port", "0", "--db", str(junk))
    _assert_clear_refusal(proc, 2, str(junk))
    assert junk.read_bytes() == b"this is not an sqlite database\n" * 200, "the file was modified"


def test_port_already_in_use(spawn, tmp_path: Path) -> None:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        proc = spawn("--host", "127.0.0.1", "--port", str(port), "--db", str(tmp_path / "s.db"))
        _assert_clear_refusal(proc, None, str(port))
    finally:
        holder.close()


def test_port_taken_by_another_sidecar(spawn, tmp_path: Path) -> None:
    first = spawn(*_base(tmp_path))
    port = first.ready()
    second = spawn("--host", "127.0.0.1", "--port", str(port), "--db", str(tmp_path / "other.db"))
    _assert_clear_refusal(second, None, str(port))
    _hello(port)  # the first one is unaffected
    first.signal(signal.SIGTERM)
    assert first.finish() == 0


def test_unusable_host(spawn, tmp_path: Path) -> None:
    """An address this machine does not have (TEST-NET-1): a clear refusal."""
    proc = spawn("--host", "192.0.2.1", "--port", "0", "--db", str(tmp_path / "s.db"))
    _assert_clear_refusal(proc, None, "192.0.2.1")
