"""Launcher for the standalone durabletask-go sidecar (main.go of github.com/dapr/durabletask-go).

The binary is installed by scripts/install-durabletask-go.sh into .tools/bin/durabletask-go.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from conformance.targets.process import (
    ManagedProcess,
    ProcessExitedError,
    ProcessSpec,
    wait_for_grpc_ready,
)

INSTALL_SCRIPT = "scripts/install-durabletask-go.sh"


def default_binary() -> Path:
    """Where scripts/install-durabletask-go.sh puts it: .tools/ of the library root (conformance/library.py),
    or $TASKHUB_DURABLETASK_GO (another release, built into the user cache: `conformance versions` sets it)."""
    other = os.environ.get("TASKHUB_DURABLETASK_GO")
    if other:
        return Path(other)
    return _library_root() / ".tools" / "bin" / "durabletask-go"


def _library_root() -> Path:
    from conformance.library import find_library

    return find_library().root

# main.go prints this once it is listening: fmt.Printf("server listening at %v\n", lis.Addr())
_READY_RE = re.compile(r"server listening at (?P<address>\S+)")
# log.Fatalf("failed to listen: ...") from Go's net package when the port is taken.
_ADDRESS_IN_USE = "address already in use"


class DurableTaskGoNotInstalledError(FileNotFoundError):
    """The sidecar binary is missing; the message says how to install it."""


@dataclass(frozen=True, kw_only=True)
class DurableTaskGoSidecar:
    """How to launch the sidecar. start() returns a handle to one running instance."""

    binary: Path = field(default_factory=default_binary)
    ready_timeout: float = 30.0
    stop_timeout: float = 10.0

    def start(self, *, db_path: Path | None = None, log_dir: Path,
              host: str = "127.0.0.1") -> RunningSidecar:
        """Start the sidecar on a free port and return once it answers Hello.

        db_path None means a fresh sqlite file in a temp dir under log_dir, so that it is cleaned
        up with the logs and can be inspected next to them after a failure.
        """
        if not self.binary.is_file():
            raise DurableTaskGoNotInstalledError(
                f"durabletask-go sidecar binary not found at {self.binary}.\n"
                f"Install it with: {_library_root() / INSTALL_SCRIPT}"
            )
        log_dir.mkdir(parents=True, exist_ok=True)
        if db_path is None:
            db_path = Path(tempfile.mkdtemp(prefix="dtgo-db-", dir=log_dir)) / "durabletask.sqlite3"
        sidecar = RunningSidecar(launcher=self, db_path=db_path, log_dir=log_dir, host=host)
        sidecar._launch(port=0)
        return sidecar


class RunningSidecar:
    """One running durabletask-go process and its database; survives stop/kill via restart()."""

    def __init__(self, *, launcher: DurableTaskGoSidecar, db_path: Path, log_dir: Path,
                 host: str) -> None:
        self.launcher = launcher
        self.db_path = db_path
        self.log_dir = log_dir
        self.host = host
        stamp = launcher.binary.with_name(launcher.binary.name + ".version")
        # Written by the install script; lets reports name the engine version.
        self.version: str | None = stamp.read_text().strip() if stamp.is_file() else None
        self._process: ManagedProcess | None = None
        self._port = 0

    @property
    def process(self) -> ManagedProcess:
        assert self._process is not None, "not launched"
        return self._process

    @property
    def log_paths(self) -> list[Path]:
        """Its stdout and stderr files, every start's (the runner names them in a failure and reads there what
        the engine refused, as it keeps no record of its own)."""
        return sorted(self.log_dir.glob("durabletask-go-*.log"))

    @property
    def port(self) -> int:
        return self._port

    @property
    def address(self) -> str:
        """host:port for gRPC clients. Re-read it after restart(), which may rarely change it."""
        return f"{_connect_host(self.host)}:{self._port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, *, timeout: float | None = None) -> int:
        """SIGTERM, then SIGKILL after the timeout; returns the exit code (-15 after a SIGTERM)."""
        return self.process.stop(timeout=self.launcher.stop_timeout if timeout is None else timeout)

    def kill(self) -> int:
        """kill -9, to simulate a crash; returns -9."""
        return self.process.kill()

    def restart(self) -> None:
        """Start again on the same database (stopping first if still running).

        It reuses the old port so that clients' gRPC channels reconnect by themselves. If another
        process took that port while the sidecar was down, a new port is used: .address changes.
        """
        if self.process.is_running():
            self.stop()
        try:
            self._launch(port=self._port)
        except ProcessExitedError as exc:
            if _ADDRESS_IN_USE not in exc.stderr_tail:
                raise
            self._launch(port=0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._process is not None:
            self.stop()

    def __repr__(self) -> str:
        return f"<RunningSidecar durabletask-go {self.version} {self.address} db={self.db_path}>"

    def _launch(self, *, port: int) -> None:
        # Port 0 lets the sidecar bind any free port itself (Go's net.Listen) and print the real
        # address. No free_port() race, which matters when xdist workers start sidecars together.
        spec = ProcessSpec(
            name="durabletask-go",
            argv=(str(self.launcher.binary), "-host", self.host, "-port", str(port),
                  "-db", str(self.db_path)),
            log_dir=self.log_dir,
        )
        deadline = time.monotonic() + self.launcher.ready_timeout
        process = ManagedProcess.start(spec=spec)
        try:
            match = process.wait_for_line(_READY_RE, timeout=self.launcher.ready_timeout)
            self._port = int(match["address"].rpartition(":")[2])
            wait_for_grpc_ready(self.address, timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            process.kill()
            raise
        self._process = process


def _connect_host(bind_host: str) -> str:
    """Where a client connects for a given bind host (wildcards mean loopback)."""
    if bind_host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if bind_host == "::":
        return "[::1]"
    return f"[{bind_host}]" if ":" in bind_host else bind_host
