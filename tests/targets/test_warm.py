"""Warm driver JVMs (conformance/targets/warm.py, the Java driver's --serve): real JVMs on the reference
sidecar, no mocks. A pool hands out a worker that answers; a JVM's second session sees nothing of its
first; a JVM killed, idle or mid-scenario, is replaced and no scenario is lost to it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

import taskhub_programs as P
from conformance.events import Outcome
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_scenario
from conformance.targets.base import WorkerStart
from conformance.targets.reference import start_reference_sidecar
from conformance.targets.registry import load_targets
from conformance.targets.warm import Pool, WarmWorker, start_served_worker, using, warm_workers
from tests.waiting import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = REPO_ROOT / ".tools" / "java-driver" / "bin" / "durabletask-java-driver"
WORKER = "durabletask-java"
COMMAND = f"{LAUNCHER} --sidecar {{address}} --canonical {{canonical}}"

pytestmark = pytest.mark.sdk


@pytest.fixture
def launcher() -> Path:
    if not LAUNCHER.is_file():
        pytest.fail(f"{LAUNCHER} is missing: build the durabletask-java driver with scripts/install-java-driver.sh",
                    pytrace=False)
    return LAUNCHER


@pytest.fixture
def pool(launcher: Path, tmp_path: Path):
    pool = Pool(name=WORKER, argv=[str(launcher), "--serve"], size=1, log_dir=tmp_path / "serve")
    yield pool
    pids = pool.pids()
    pool.close()
    for pid in pids:  # ended by the pool, not left behind
        wait_for(lambda: not _alive(pid), f"serve JVM {pid} to end")


@pytest.fixture
def sidecar(tmp_path: Path):
    (tmp_path / "sidecar").mkdir()
    handle = start_reference_sidecar(options={}, work_dir=tmp_path / "sidecar")
    yield handle
    handle.stop()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _start(pool: Pool, sidecar, tmp_path: Path, programs: dict, *, name: str):
    work = tmp_path / name
    work.mkdir()
    spec = WorkerStart(address=sidecar.address, bundle=P.parse_bundle({"programs": programs}), bundle_doc=programs,
                       work_dir=work, ledger=work / "ledger.jsonl")
    with using({WORKER: pool}):
        return start_served_worker(spec, name=WORKER, command=COMMAND)


def _stderr(tmp_path: Path, name: str) -> str:
    return (tmp_path / name / f"{WORKER}-1.stderr.log").read_text(encoding="utf-8")


def test_the_pool_hands_out_a_worker_that_answers(pool, sidecar, tmp_path):
    worker = _start(pool, sidecar, tmp_path, {"main": {"steps": [{"return": "a"}]}}, name="one")
    assert isinstance(worker, WarmWorker), "the scenario got a fresh process, not a warm one"
    assert (tmp_path / "one" / f"{WORKER}-1.stdout.log").read_text().startswith(f"connected to {sidecar.address}")
    worker.stop()
    assert pool.pids() == [worker.served.pid], "a clean stop gives the JVM back"
    assert "registered main" in _stderr(tmp_path, "one") and "stopped" in _stderr(tmp_path, "one")


def test_a_second_session_on_the_same_jvm_sees_nothing_of_the_first(pool, sidecar, tmp_path):
    first = _start(pool, sidecar, tmp_path, {"first_only": {"steps": [{"return": 1}]}}, name="one")
    first.stop()
    second = _start(pool, sidecar, tmp_path, {"second_only": {"steps": [{"return": 2}]}}, name="two")
    try:
        assert isinstance(second, WarmWorker) and second.served is first.served, "not the same JVM"
        registered = [line for line in _stderr(tmp_path, "two").splitlines() if "registered" in line]
        assert registered and registered[0].endswith("registered second_only"), registered
        assert "first_only" not in _stderr(tmp_path, "two"), "the first session's lines reached the second's log"
    finally:
        second.stop()


def test_a_jvm_killed_idle_is_replaced_before_it_is_handed_out(pool, sidecar, tmp_path):
    wait_for(lambda: pool.pids(), "the first serve JVM")
    killed = pool.pids()[0]
    os.kill(killed, signal.SIGKILL)
    wait_for(lambda: not _alive(killed), f"serve JVM {killed} to die")
    worker = _start(pool, sidecar, tmp_path, {"main": {"steps": [{"return": "a"}]}}, name="one")
    try:
        assert isinstance(worker, WarmWorker) and worker.served.pid != killed
    finally:
        worker.stop()


def test_a_jvm_killed_mid_scenario_is_replaced(pool, sidecar, tmp_path):
    worker = _start(pool, sidecar, tmp_path, {"main": {"steps": [{"return": "a"}]}}, name="one")
    assert isinstance(worker, WarmWorker)
    killed = worker.served.pid
    os.kill(killed, signal.SIGKILL)
    worker.stop()  # its control connection is gone: the JVM is retired, another started
    assert pool.retired == 1
    wait_for(lambda: pool.pids() and killed not in pool.pids(), "a serve JVM in place of the killed one")
    again = _start(pool, sidecar, tmp_path, {"main": {"steps": [{"return": "b"}]}}, name="two")
    try:
        assert isinstance(again, WarmWorker) and again.served.pid != killed
    finally:
        again.stop()


SCENARIO = """\
title: the same workflow name, another body
requirements: [RPL-DET-001]
programs:
  main:
    steps:
      - call_activity: {{name: echo, input: {value}}}
        as: x
      - return: "${{x}}"
start: {{workflow: main, input: null}}
expect:
  status: COMPLETED
  output: {value}
"""


def test_scenarios_through_the_harness_share_one_jvm_and_keep_their_own_programs(launcher, tmp_path):
    root = tmp_path / "scenarios"
    (root / "warm").mkdir(parents=True)
    for value in ("first", "second"):
        (root / "warm" / f"{value}.yaml").write_text(SCENARIO.format(value=json.dumps(value)), encoding="utf-8")
    pair = load_targets().pair("reference", WORKER)
    assert pair.worker.serve, "target.yaml declares no serve command"
    with warm_workers([pair], jobs=1) as pools:
        for value in ("first", "second"):
            scenario = load_scenario(root / "warm" / f"{value}.yaml", root=root)
            result = run_scenario(scenario, pair, work_root=tmp_path, reproduce="")
            assert result.outcome == Outcome.PASSED, f"{value}: {result.outcome.value}\n{result.message}"
        pool = pools[WORKER]
        assert pool.handed_out >= 2 and pool.retired == 0 and len(pool.pids()) == 1, \
            f"one JVM served both: {pool.handed_out} sessions, {pool.retired} retired, pids {pool.pids()}"


OWNER = """\
import sys
from pathlib import Path
from conformance.targets.warm import Pool
pool = Pool(name="durabletask-java", argv=[sys.argv[1], "--serve"], size=1, log_dir=Path(sys.argv[2]))
served = pool.take()
print(served.pid, flush=True)
sys.stdin.read()  # until killed
"""


def test_a_serve_jvm_ends_when_its_owner_is_killed(launcher, tmp_path):
    import subprocess
    import sys

    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(launcher), str(tmp_path / "serve")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        jvm = int(owner.stdout.readline())
        assert _alive(jvm)
    finally:
        owner.kill()
        owner.wait()
    # Its control connection closed with its owner: the JVM exits on its own (its parent reaps it).
    wait_for(lambda: not _alive(jvm), f"serve JVM {jvm} to exit after its owner was killed", timeout=30)
