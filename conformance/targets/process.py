"""Start, watch and stop the external processes the harness drives (sidecars, workers, SDK apps).

POSIX only: process groups, SIGTERM/SIGKILL and os.waitid.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self

import grpc

from conformance import stopping
from conformance.reporting.logs import adopt_files

HELLO_METHOD = "/TaskHubSidecarService/Hello"
_POLL_INTERVAL_S = 0.02
_STDERR_TAIL_LINES = 20
_STDERR_TAIL_BYTES = 64 * 1024
# Processes started and not yet reaped, for `end_live_processes` (a run stopped at once).
_LIVE: set[ManagedProcess] = set()
_LIVE_LOCK = threading.Lock()


class ProcessError(RuntimeError):
    """A managed process did not behave as expected."""


class ProcessExitedError(ProcessError):
    """The process exited while we were waiting for it."""

    def __init__(self, message: str, *, returncode: int, stderr_tail: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class ProcessTimeoutError(ProcessError, TimeoutError):
    """The process is still running but did not get where we waited for in time."""


@dataclass(frozen=True, kw_only=True)
class ProcessSpec:
    """What to run. Frozen so that a restart can reuse it, possibly with `dataclasses.replace`."""

    name: str  # used in log file names and error messages
    argv: tuple[str, ...]
    log_dir: Path
    env: Mapping[str, str] | None = None  # the whole environment; None inherits ours
    cwd: Path | None = None


class ManagedProcess:
    """A running process started from a `ProcessSpec`, with stdout/stderr in files under log_dir.

    The child leads a new session (and so a new process group), which lets stop() and kill()
    take its children down with it. The child is reaped only by stop() or kill(). Until then its
    pid, which is also the group id, cannot be reused, so signalling the group can never hit a
    stranger.
    """

    def __init__(self, *, spec: ProcessSpec) -> None:
        stopping.check()  # a stopped run starts nothing more
        self.spec = spec
        self.stdout_path, self.stderr_path, out, err = create_log_files(spec.log_dir, spec.name)
        try:
            self._popen = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=None if spec.env is None else dict(spec.env),
                cwd=spec.cwd,
                start_new_session=True,
            )
        finally:
            # The child holds its own copies of the descriptors.
            out.close()
            err.close()
        with _LIVE_LOCK:
            _LIVE.add(self)
        if stopping.stopping():  # stopped while this one started: end_live_processes may have missed it
            self._kill_group()
        adopt_files(self.stdout_path, self.stderr_path)  # into the scenario's log when it ends
        # wait_for_line resumes after the last line it matched.
        self._stdout_pos = 0
        self._stdout_partial = b""
        self._stdout_lines: deque[str] = deque()

    @classmethod
    def start(cls, *, spec: ProcessSpec) -> ManagedProcess:
        return cls(spec=spec)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """None while running; otherwise the exit code, or -N if killed by signal N (as Popen)."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        # WNOWAIT: look at the exit status but leave the zombie, which keeps the pid reserved.
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None:
            return None
        if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            return -info.si_status
        return info.si_status

    def is_running(self) -> bool:
        return self.returncode is None

    def wait_for_line(self, pattern: str | re.Pattern[str], *, timeout: float) -> re.Match[str]:
        """Wait for the next complete stdout line that matches `pattern` (re.search) and return it.

        Raises ProcessExitedError if the process exits first and ProcessTimeoutError after
        `timeout` seconds; both messages include the last lines of stderr.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            # Read the exit status before the output, so that lines written just before exiting
            # are still seen.
            returncode = self.returncode
            self._read_new_stdout_lines()
            while self._stdout_lines:
                if match := regex.search(self._stdout_lines.popleft()):
                    return match
            if returncode is not None:
                tail = self.stderr_tail()
                raise ProcessExitedError(
                    self._describe(f"exited with code {returncode} before printing a line"
                                   f" matching {regex.pattern!r}", tail),
                    returncode=returncode,
                    stderr_tail=tail,
                )
            stopping.check()
            if time.monotonic() >= deadline:
                raise ProcessTimeoutError(
                    self._describe(f"did not print a line matching {regex.pattern!r} within"
                                   f" {timeout:g}s (still running, pid {self.pid})",
                                   self.stderr_tail())
                )
            time.sleep(_POLL_INTERVAL_S)

    def stop(self, *, timeout: float = 10.0) -> int:
        """SIGTERM the process, SIGKILL its whole group after `timeout` s; return the exit code."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        if self.returncode is None:
            # The pid only, not the group: a well-behaved leader shuts its own children down.
            os.kill(self.pid, signal.SIGTERM)
            if not self._wait_exited(timeout=timeout):
                self._kill_group()
        return self._reap()

    def kill(self) -> int:
        """kill -9 the process and its group at once (a crash, for durability tests)."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        self._kill_group()
        return self._reap()

    def stderr_tail(self, *, lines: int = _STDERR_TAIL_LINES) -> str:
        return file_tail(self.stderr_path, lines=lines)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.spec.name} pid={self.pid} returncode={self.returncode}>"

    def _wait_exited(self, *, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if self.returncode is None:
            self._await_exit(timeout)
        while self.returncode is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL_S)
        return True

    def _await_exit(self, timeout: float) -> None:
        """Block until the process exits or `timeout` passes, without reaping it: a pidfd turns
        readable at the exit (Linux 5.3+); without one this returns at once and the caller polls."""
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            return
        try:
            waiter = select.poll()
            waiter.register(fd, select.POLLIN)
            waiter.poll(None if timeout == float("inf") else max(0, int(timeout * 1000)))
        finally:
            os.close(fd)

    def _kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _reap(self) -> int:
        # The leader has exited or been SIGKILLed. Children it left behind are killed while the
        # unreaped leader still reserves the group id; only then is the zombie collected.
        self._wait_exited(timeout=float("inf"))
        self._kill_group()
        code = self._popen.wait()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        return code

    def _read_new_stdout_lines(self) -> None:
        with open(self.stdout_path, "rb") as f:
            f.seek(self._stdout_pos)
            data = f.read()
        self._stdout_pos += len(data)
        *complete, self._stdout_partial = (self._stdout_partial + data).split(b"\n")
        self._stdout_lines.extend(line.decode(errors="replace").rstrip("\r") for line in complete)

    def _describe(self, what: str, stderr_tail: str) -> str:
        return describe(f"{self.spec.name} {what}", f"command: {shlex.join(self.spec.argv)}",
                        stdout=self.stdout_path, stderr=self.stderr_path, stderr_tail=stderr_tail)


def describe(headline: str, *context: str, stdout: Path, stderr: Path, stderr_tail: str) -> str:
    """A process that did not come up, for a message: what happened, then where its output is."""
    tail = "\n".join("    " + line for line in stderr_tail.splitlines()) or "    (empty)"
    lines = [headline, *(f"  {c}" for c in context), f"  stdout:  {stdout}", f"  stderr:  {stderr}"]
    return "\n".join(lines) + f"\n  last stderr lines:\n{tail}"


def file_tail(path: Path, *, lines: int = _STDERR_TAIL_LINES) -> str:
    """The last `lines` lines of a log file (read from its last bytes only); "" when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _STDERR_TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def free_port(*, host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago, for programs that cannot bind port 0 themselves.

    Another process may take it before the caller binds it, so callers should retry on
    "address already in use".
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_grpc_ready(address: str, *, timeout: float, method: str = HELLO_METHOD) -> None:
    """Call the unary `method` with an empty request until it answers OK.

    Raises TimeoutError carrying the last gRPC error after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    last = "no attempt"
    while True:
        remaining = deadline - time.monotonic()
        # A fresh channel per attempt: a channel that has failed to connect waits out gRPC's
        # reconnect backoff (1 s and growing) before it tries again.
        # http_proxy settings in CI must not capture connections to a local sidecar.
        with grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)]) as channel:
            call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
            try:
                call(b"", timeout=max(0.05, min(remaining, 2.0)))
                return
            except grpc.RpcError as exc:
                # Errors raised by a call are also grpc.Call, which carries the status.
                last = (f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.Call)
                        else repr(exc))
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{method} on {address} did not answer OK within {timeout:g}s;"
                               f" last error: {last}")
        time.sleep(0.05)


def create_log_files(log_dir: Path, name: str) -> tuple[Path, Path, BinaryIO, BinaryIO]:
    """Fresh per-start log files (name-1.*, name-2.*, ...), so a restart keeps the old logs."""
    log_dir.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        stdout_path = log_dir / f"{name}-{n}.stdout.log"
        try:
            out = open(stdout_path, "xb")  # exclusive create claims the number
        except FileExistsError:
            n += 1
            continue
        stderr_path = log_dir / f"{name}-{n}.stderr.log"
        return stdout_path, stderr_path, out, open(stderr_path, "wb")


def end_live_processes() -> None:
    """SIGKILL the group of every process started here and not yet reaped (a run stopped at once). Not
    reaped here: the unreaped leader keeps its pid and group id reserved until its owner's stop()."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for process in live:
        process._kill_group()
