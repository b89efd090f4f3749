"""The fake-worker command: connects, completes work, stops on SIGTERM, and fails clearly."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from conformance.targets.process import free_port
from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "taskhub_programs" / "examples" / "bundle.yaml"


def worker_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "fake_worker", *args]


def test_runs_a_workflow_and_stops_on_sigterm():
    srv = SidecarServer.start(port=0)
    proc = subprocess.Popen(worker_cmd("--sidecar", srv.address, "--programs", str(BUNDLE)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == f"connected to {srv.address}"
        channel = grpc.insecure_channel(srv.address)
        client = TaskHubClient(channel)
        req = pb.CreateInstanceRequest(instanceId="cli", name="chain")
        req.input.value = json.dumps("a")
        client.call("StartInstance", req, timeout=20)
        state = client.call("WaitForInstanceCompletion", pb.GetInstanceRequest(instanceId="cli", getInputsAndOutputs=True),
                            timeout=20).workflowState
        assert json.loads(state.output.value) == "a-b-c"
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        srv.stop()


def test_unreachable_sidecar_is_a_clear_error():
    port = free_port()
    began = time.monotonic()
    out = subprocess.run(worker_cmd("--sidecar", f"127.0.0.1:{port}", "--programs", str(BUNDLE),
                                    "--connect-timeout", "1"), capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert out.returncode == 1
    assert f"cannot reach the sidecar at 127.0.0.1:{port} within 1s" in out.stderr
    assert "Traceback" not in out.stderr
    assert time.monotonic() - began < 15


def test_bad_bundle_lists_every_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("programs:\n  a: {steps: [{call_activity: {}}, {teleport: 1}]}\n  b: {steps: [{timer: soon}]}\n")
    out = subprocess.run(worker_cmd("--sidecar", "127.0.0.1:1", "--programs", str(bad)), capture_output=True,
                         text=True, timeout=30, cwd=ROOT)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "3 problem(s)" in out.stderr
    assert "$.programs.a.steps[0].call_activity" in out.stderr and "$.programs.b.steps[0].timer.duration" in out.stderr


def test_api_token_is_sent():
    srv = SidecarServer.start(port=0, api_token="tok")
    proc = subprocess.Popen(worker_cmd("--sidecar", srv.address, "--programs", str(BUNDLE), "--api-token", "tok"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == f"connected to {srv.address}"
        # "connected" is printed once the stream is opened; the server registers it a moment later.
        deadline = time.monotonic() + 10
        while srv.engine.connected_streams() != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert srv.engine.connected_streams() == 1
        bad = subprocess.run(worker_cmd("--sidecar", srv.address, "--programs", str(BUNDLE), "--connect-timeout", "3"),
                             capture_output=True, text=True, timeout=30, cwd=ROOT)
        assert bad.returncode == 1 and "refused the API token" in bad.stderr, bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        srv.stop()
