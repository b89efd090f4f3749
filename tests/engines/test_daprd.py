"""daprd as an engine target: a few library scenarios on daprd with the reference worker.

Needs the binaries of scripts/install-daprd.sh (`./dev test` installs them, cached per user).
Without them the tests fail with the install hint rather than skip, so CI cannot go green
without the engine.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from conformance.library import find_library
from conformance.events import Outcome
from conformance.runner import Plan, run_plan
from conformance.scenario.loader import load_scenario
from conformance.targets.daprd import DaprBinaries, DaprdNotInstalledError, DaprdSidecar
from conformance.targets.registry import load_targets

# One of each: activities, an activity redelivered after its worker's stream broke (the adversary
# must fire although daprd sends no completion tokens), an external event, a real-time timer,
# children, a restart on the SQLite store, and a patch mismatch that stalls (recovery from a stall
# is intermittent on daprd: a gap).
SCENARIOS = (
    "activities/chain",
    "activities/crash-after-run-at-least-once",
    "events/raise-delivered-and-recorded",
    "timers/timer-fires",
    "children/child-failure-reaches-parent",
    "history/survives-sidecar-restart",
    "patching/removed-patch-stalls",
)


def _binaries() -> DaprBinaries:
    try:
        return DaprBinaries.find()
    except DaprdNotInstalledError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def test_scenarios_pass_on_daprd(tmp_path: Path) -> None:
    _binaries()
    root = find_library().scenarios
    scenarios = [load_scenario(root / f"{sid}.yaml", root=root) for sid in SCENARIOS]
    pair = load_targets().pair("daprd", "reference")
    results = run_plan(Plan(tuple((s, pair) for s in scenarios)), sinks=[], jobs=2, work_root=tmp_path)
    assert [(r.scenario, r.outcome, r.message) for r in results] == \
        [(sid, Outcome.PASSED, "") for sid in SCENARIOS]


def test_daprd_listens_only_on_loopback_and_stops_by_pid(tmp_path: Path) -> None:
    sidecar = DaprdSidecar(options={}, work_dir=tmp_path, binaries=_binaries())
    try:
        assert sidecar.address.startswith("127.0.0.1:")
        argv = sidecar.process.spec.argv
        assert argv[argv.index("--dapr-listen-addresses") + 1] == "127.0.0.1"
        for default in ("50001", "3500", "9090"):
            assert default not in argv
        assert sidecar.process.is_running()
    finally:
        sidecar.stop()
    assert not sidecar.process.is_running()
    assert any(p.stat().st_size > 0 for p in sidecar.log_paths)  # the logs stay with the scenario's work dir


def test_daprd_serve_runs_one_daprd_until_sigterm(tmp_path: Path) -> None:
    _binaries()
    proc = subprocess.Popen([sys.executable, "-m", "conformance.targets.daprd_serve", "--work-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"daprd ready at (127\.0\.0\.1:\d+)", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None else "")
        with grpc.insecure_channel(found.group(1)) as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0
    daprd_log = next((tmp_path / "daprd").glob("daprd-*.stdout.log")).read_text()
    assert "Daprd shutdown gracefully" in daprd_log  # stopped by pid, not left running
