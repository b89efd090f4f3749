"""A killed in-process reference sidecar keeps its ports until it restarts: no other server of the machine
may get them from port 0 meanwhile (a scenario's worker once reconnected to another scenario's sidecar)."""

from __future__ import annotations

import socket
from pathlib import Path

import grpc
import pytest

from conformance.targets.reference import ReferenceSidecar, hold_port


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_held_port_refuses_connections_and_other_listeners() -> None:
    port = _free_port()
    held = hold_port(port)
    try:
        with socket.socket() as client:
            with pytest.raises(ConnectionRefusedError):  # as a sidecar that is down
                client.connect(("127.0.0.1", port))
        with socket.socket() as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError):  # bound exclusively: not even SO_REUSEADDR shares it
                other.bind(("127.0.0.1", port))
    finally:
        held.close()


def test_kill_holds_every_port_and_restart_serves_on_them_again(tmp_path: Path) -> None:
    sidecar = ReferenceSidecar(options={"apps": ["a", "b"]}, work_dir=tmp_path)
    try:
        ports = {sidecar.server.port, *(int(a.rsplit(":", 1)[1]) for a in sidecar.app_addresses.values())}
        assert len(ports) >= 2
        sidecar.kill()
        assert {s.getsockname()[1] for s in sidecar._placeholders.values()} == ports
        sidecar.restart()
        assert not sidecar._placeholders
        channel = grpc.insecure_channel(sidecar.address)
        try:
            grpc.channel_ready_future(channel).result(timeout=10)
        finally:
            channel.close()
        sidecar.kill()
    finally:
        sidecar.stop()  # the end of a scenario with the sidecar down: its ports go back
    assert not sidecar._placeholders
