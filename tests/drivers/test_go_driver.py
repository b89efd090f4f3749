"""The durabletask-go driver (drivers/durabletask_go) through the harness, on the reference sidecar.

The driver is a Go binary built by scripts/install-go-driver.sh into .tools/bin/durabletask-go-driver;
without it every test here fails and says how to build it. Scenarios run on the pair
reference + durabletask-go-worker exactly as `conformance run --worker durabletask-go-worker` does.
The scenarios written here avoid literal action ids: the Go SDK numbers actions from 0, the Dapr
Python SDKs from 1 (RPL-IDS-001: the worker's choice, not a gap).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conformance.targets.registry import load_targets
from tests.drivers.driving import (RETRY_TIMEOUT, assert_passed, canonical_bundle, run_on_reference,
                                  write_scenario)

pytestmark = pytest.mark.sdk

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARY = REPO_ROOT / ".tools" / "bin" / "durabletask-go-driver"
WORKER = "durabletask-go-worker"
EXIT_USAGE, EXIT_GAP = 2, 3
FOLDER = "go-driver"  # where a test's own scenarios are written


def _driver() -> Path:
    """The built driver; a missing binary fails the test (not skips it) and says how to build it."""
    if not BINARY.is_file():
        pytest.fail(f"{BINARY} is missing: build the durabletask-go driver with scripts/install-go-driver.sh "
                    "(needs Go >= 1.26 and the Go module proxy)", pytrace=False)
    return BINARY


def _run(scenario_path: Path, root: Path, tmp_path: Path):
    return run_on_reference(scenario_path, root, tmp_path, worker=WORKER)


def test_target_is_declared() -> None:
    worker = load_targets().worker(WORKER)
    assert worker.kind == "command"
    assert {"patching", "versions", "retries", "ledger", "children", "events"} <= worker.capabilities
    assert {"crossapp", "propagation"} <= worker.capabilities
    # The SDK gives no one chunk's events (api/propagation.go: WorkflowResult.events is unexported).
    assert "propagated_events" not in worker.capabilities
    assert "ids_from_one" not in worker.capabilities  # actions from 0: the worker's choice (RPL-IDS-001, INFO)
    assert "RPL-IDS-001" not in {g.requirement for g in worker.gaps}, "an id base is not a MUST failure"
    assert all(g.evidence for g in worker.gaps), "every declared gap names its evidence"


def test_library_chain_passes(tmp_path: Path) -> None:
    _driver()
    root = REPO_ROOT / "scenarios"
    assert_passed(_run(root / "activities" / "chain.yaml", root, tmp_path))


@pytest.mark.parametrize("scenario", ["crossapp/activity-and-child-on-other-app", "propagation/own-and-lineage-across-apps",
                                      "propagation/lineage-across-three-apps"])
def test_apps_and_propagation(scenario: str, tmp_path: Path) -> None:
    """`app:` (router.targetAppID), `propagation:` own / lineage / none on activities and children, and the
    `propagated` value read from the SDK's ActivityContext.GetPropagatedHistory()."""
    _driver()
    root = REPO_ROOT / "scenarios"
    assert_passed(_run(root / f"{scenario}.yaml", root, tmp_path))


FEATURES = """\
    title: Most of the program language on the Go SDK, with Python's value semantics
    requirements: [RPL-DET-001]
    requires: [retries, children, events, timers, patching, ledger]
    programs:
      main:
        steps:
          - if_patched: {patch: p1, then: [{set: {var: patched, value: "new"}}], else: [{set: {var: patched, value: "old"}}]}
          - set: {var: n, value: {$add: ["${input.base}", 0.5]}}
          - call_activity: {name: fail, input: {times: 1, message: flaky}, retry: {max_attempts: 2, first_delay: 50ms}}
            as: retried
          - all:
              - call_activity: {name: record, input: a}
              - call_activity: {name: echo, input: {z: 1.0, a: [1, "x"]}}
              - call_child: {workflow: child, input: "${n}"}
            as: xs
          - timer: 10ms
          - wait_event: {name: nothing, timeout: 50ms, default: {timed_out: true}}
            as: w
          - set_status: {stage: "${patched}", n: "${n}"}
          - wait_event: Go
            as: g
          - return:
              text: "n=${n} xs=${xs}"
              retried: "${retried}"
              w: "${w}"
              g: "${g}"
              len: {$len: "${xs}"}
      child:
        steps:
          - if:
              cond: {$lt: ["${input}", 10]}
              then: [{return: {$concat: ["child got ", "${input}"]}}]
          - fail: {message: "too big: ${input}"}
    start: {workflow: main, input: {base: 2}}
    steps:
      - wait: {status: RUNNING}
      - sleep: 500ms
      - raise: {event: go, data: {ok: true}}
    expect:
      status: COMPLETED
      custom_status: '{"n":2.5,"stage":"new"}'
      output:
        text: 'n=2.5 xs=["a",{"a":[1,"x"],"z":1},"child got 2.5"]'
        retried: {times: 1, message: flaky}
        w: {timed_out: true}
        g: {ok: true}
        len: 3
      history:
        contains_in_order:
          - {WorkflowStarted: {version: {patches: [p1]}}}
          - {TaskScheduled: {name: fail, taskExecutionId: "${te}"}}
          - {TimerCreated: {activityRetry: {taskExecutionId: "${te}"}}}
          - {TaskScheduled: {name: fail, taskExecutionId: "${te}"}}
          - {ChildWorkflowInstanceCreated: {name: child, input: 2.5}}
          - ExecutionCompleted
    ledger: {ok: 1, lost: 0, duplicated: 0, unexpected: 0, executions: 1}
    timeout: 20s
    checks: [replay_determinism]
"""


def test_program_language_features(tmp_path: Path) -> None:
    _driver()
    assert_passed(_run(*write_scenario(tmp_path, folder=FOLDER, name="features", text=FEATURES), tmp_path))


CONTINUE_AND_VERSIONS = """\
    title: A pinned version survives a redeploy; continue-as-new carries an unconsumed event
    requirements: [VER-PIN-001, CAN-CARRY-001]
    requires: [carry_events, events, versions]
    programs:
      wf:
        versions:
          v1: {steps: [{wait_event: go}, {return: one}]}
          v2: {steps: [{wait_event: go}, {return: two}]}
      loop:
        steps:
          - if:
              cond: {$eq: ["${input}", 1]}
              then: [{wait_event: b, as: b}, {return: {$concat: ["got ", "${b}"]}}]
          - wait_event: a
          - continue_as_new: {input: 1, carry_events: true}
    start: {workflow: wf}
    steps:
      - start: {workflow: loop, as: loop}
      - wait: {status: RUNNING}
      - wait: {status: RUNNING, instance: loop}
      - stop_worker: {}
      - raise: {event: a, instance: loop}
      - raise: {event: b, data: second, instance: loop}
      - start_worker:
          programs:
            wf:
              versions:
                v1: {steps: [{wait_event: go}, {return: one}]}
                v2: {steps: [{wait_event: go}, {return: two}]}
                v3: {steps: [{wait_event: go}, {return: three}]}
      - raise: {event: go}
    expect:
      status: COMPLETED
      output: two
      history:
        contains_in_order: [{WorkflowStarted: {version: {name: v2}}}, ExecutionStarted, ExecutionCompleted]
      instances:
        loop:
          status: COMPLETED
          output: got second
          history:
            contains_in_order: [{ExecutionStarted: {input: 1}}, {EventRaised: {name: b, input: second}},
                                ExecutionCompleted]
    timeout: 20s
"""


def test_continue_as_new_and_versions(tmp_path: Path) -> None:
    _driver()
    assert_passed(_run(*write_scenario(tmp_path, folder=FOLDER, name="continue-and-versions", text=CONTINUE_AND_VERSIONS), tmp_path))


def test_refuses_a_step_the_sdk_cannot_express(tmp_path: Path) -> None:
    driver = _driver()
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [
        {"call_activity": {"name": "echo", "input": 1}},
        {"if": {"cond": True, "then": [{"any": [{"wait_event": "go"}, {"timer": "1s"}], "as": "first"}]}},
    ]}})
    # The sidecar address is never dialled: the bundle is refused first.
    proc = subprocess.run([str(driver), "--sidecar", "127.0.0.1:1", "--canonical", str(bundle)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == EXIT_GAP, proc.stderr
    assert "$.programs.main.steps[1].if.then[0].any" in proc.stderr
    assert proc.stdout == ""


def test_retry_timeout_is_passed_and_zero_is_refused(tmp_path: Path) -> None:
    """`retry.timeout` is task.RetryPolicy.RetryTimeout; a zero one, which the SDK reads as no limit, is a gap."""
    driver = _driver()
    assert "retry_timeout" in load_targets().worker(WORKER).capabilities
    assert_passed(_run(*write_scenario(tmp_path, folder=FOLDER, name="retry-timeout", text=RETRY_TIMEOUT), tmp_path))
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [
        {"call_activity": {"name": "fail", "input": 1, "retry": {"max_attempts": 3, "first_delay": "1s", "timeout": 0}}}]}})
    proc = subprocess.run([str(driver), "--sidecar", "127.0.0.1:1", "--canonical", str(bundle)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == EXIT_GAP, proc.stderr
    assert "$.programs.main.steps[0].call_activity.retry.timeout" in proc.stderr


def test_refuses_an_unknown_language_extension(tmp_path: Path) -> None:
    driver = _driver()
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [{"return": 1}]}})
    doc = json.loads(bundle.read_text(encoding="utf-8"))
    doc["programs"]["main"]["versions"][0]["steps"].insert(0, {"step": "teleport", "as": None})
    bundle.write_text(json.dumps(doc), encoding="utf-8")
    proc = subprocess.run([str(driver), "--sidecar", "127.0.0.1:1", "--canonical", str(bundle)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == EXIT_GAP, proc.stderr
    assert "$.programs.main.steps[0].teleport" in proc.stderr and "unknown to this driver" in proc.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    driver = _driver()
    raw = tmp_path / "bundle.json"  # the bundle as written is not the canonical form
    raw.write_text(json.dumps({"programs": {"m": {"steps": []}}}), encoding="utf-8")
    for argv in ([], ["--sidecar", "nonsense", "--canonical", str(canonical_bundle(tmp_path, {"m": {"steps": []}}))],
                 ["--sidecar", "127.0.0.1:1", "--canonical", str(tmp_path / "missing.json")],
                 ["--sidecar", "127.0.0.1:1", "--canonical", str(raw)]):
        proc = subprocess.run([str(driver), *argv], capture_output=True, text=True, timeout=30)
        assert proc.returncode == EXIT_USAGE, (argv, proc.stderr)
    assert "is not the canonical program form" in proc.stderr


def test_go_values_match_the_golden_file() -> None:
    """`go test` in drivers/durabletask_go: golden_test.go reads tests/programs/golden/programs.json."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: install Go >= 1.26, then run scripts/install-go-driver.sh", pytrace=False)
    tools = REPO_ROOT / ".tools"
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=readonly -modcacherw",
               GOPROXY="off")  # the modules scripts/install-go-driver.sh downloaded, nothing fetched
    env.setdefault("GOPATH", str(tools / "go"))
    env.setdefault("GOMODCACHE", str(tools / "go" / "pkg" / "mod"))
    env.setdefault("GOCACHE", str(tools / "go-build"))
    done = subprocess.run([go, "test", "-count=1", "."], cwd=REPO_ROOT / "drivers" / "durabletask_go", env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (f"go test failed (a missing module: run scripts/install-go-driver.sh):\n"
                                  f"{done.stdout[-3000:]}{done.stderr[-3000:]}")


def test_connects_and_stops_on_sigterm(tmp_path: Path) -> None:
    driver = _driver()
    from conformance.targets.reference import start_reference_sidecar

    sidecar = start_reference_sidecar(options={}, work_dir=tmp_path)
    try:
        bundle = canonical_bundle(tmp_path, {"main": {"steps": [{"return": 1}]}})
        proc = subprocess.Popen([str(driver), "--sidecar", sidecar.address, "--canonical", str(bundle)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == f"connected to {sidecar.address}\n"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
    finally:
        sidecar.stop()
