"""Starting the Dapr control plane's processes (daprd, placement, scheduler, sentry) on 127.0.0.1: ports
picked free and retried when taken meanwhile, and an HTTP health wait that fails early when the process
exits. Shared by conformance/targets/daprd.py and sentry.py, which import it and not each other.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.targets.process import ManagedProcess, ProcessExitedError, ProcessSpec, free_port

HOST = "127.0.0.1"
_PORT_ATTEMPTS = 4
_ADDRESS_IN_USE = "address already in use"


class DaprdNotInstalledError(FileNotFoundError):
    """A binary is missing; the message says how to install it."""


def wait_healthy(process: ManagedProcess, url_port: int, *, timeout: float, path: str = "/healthz") -> None:
    """Poll an HTTP health endpoint until it answers 2xx; fail early if the process exits."""
    import http.client

    deadline = time.monotonic() + timeout
    last = "no attempt"
    while True:
        if not process.is_running():
            tail = process.stderr_tail()
            raise ProcessExitedError(f"{process.spec.name} exited with code {process.returncode} before it was "
                                     f"healthy; log {process.stdout_path}\n{tail}",
                                     returncode=process.returncode or 0, stderr_tail=tail + stdout_tail(process))
        conn = http.client.HTTPConnection(HOST, url_port, timeout=2)
        try:
            conn.request("GET", path)
            status = conn.getresponse().status
            if 200 <= status < 300:
                return
            last = f"HTTP {status}"
        except OSError as exc:
            last = repr(exc)
        finally:
            conn.close()
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{process.spec.name} not healthy on {HOST}:{url_port}{path} within {timeout:g}s "
                               f"(last: {last}); log {process.stdout_path}")
        time.sleep(0.05)


def stdout_tail(process: ManagedProcess, *, size: int = 8192) -> str:
    # Dapr logs to stdout; "address already in use" shows up there, not on stderr.
    with open(process.stdout_path, "rb") as f:
        f.seek(max(0, f.seek(0, 2) - size))
        return f.read().decode(errors="replace")


def start_with_free_ports(name: str, count: int, argv_for: Any, *, log_dir: Path,
                           env: Mapping[str, str] | None, health: Any, timeout: float) -> tuple[ManagedProcess, list[int]]:
    """Start a process on `count` freshly picked ports, retrying when one was taken meanwhile."""
    for attempt in range(_PORT_ATTEMPTS):
        ports = distinct_free_ports(count)
        process = ManagedProcess.start(spec=ProcessSpec(name=name, argv=tuple(argv_for(ports)), log_dir=log_dir,
                                                        env=env))
        try:
            health(process, ports, timeout=timeout)
            return process, ports
        except (ProcessExitedError, TimeoutError) as exc:
            process.kill()
            text = str(exc) + stdout_tail(process)
            if _ADDRESS_IN_USE in text and attempt + 1 < _PORT_ATTEMPTS:
                continue
            raise
    raise AssertionError("unreachable")


def distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host=HOST)
        if port not in ports:
            ports.append(port)
    return ports
