"""The durabletask-java driver (drivers/durabletask_java) through the harness, on the reference sidecar.

The driver is a Maven project built by scripts/install-java-driver.sh into .tools/java-driver/; without
that build every test here fails and says how to build it. Scenarios run on the pair
reference + durabletask-java exactly as `conformance run --worker durabletask-java` does. The
scenarios written here avoid literal action ids (the Java SDK numbers actions from 0, its choice),
zero-valued id captures and the timer details the SDK does not send (timer origins, the sentinel
timer of an indefinite wait).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest

from conformance.events import Outcome
from conformance.targets.registry import load_targets
from tests.drivers.driving import (RETRY_TIMEOUT, assert_passed, canonical_bundle, run_on_reference,
                                  write_scenario)
import taskhub_programs as P

pytestmark = pytest.mark.sdk

REPO_ROOT = Path(__file__).resolve().parents[2]
JAR = REPO_ROOT / ".tools" / "java-driver" / "durabletask-java-driver.jar"
LAUNCHER = REPO_ROOT / ".tools" / "java-driver" / "bin" / "durabletask-java-driver"
WORKER = "durabletask-java"
EXIT_USAGE, EXIT_GAP = 2, 3
FOLDER = "java-driver"  # where a test's own scenarios are written


def _driver() -> Path:
    """The built driver's launcher; a missing build fails the test (not skips it) and says how to build it."""
    for path in (LAUNCHER, JAR):
        if not path.is_file():
            pytest.fail(f"{path} is missing: build the durabletask-java driver with scripts/install-java-driver.sh "
                        "(needs Java >= 17, Maven >= 3.6.3 and Maven Central)", pytrace=False)
    return LAUNCHER


def _drive(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(_driver()), *args], capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ the target


def _run(scenario_path: Path, root: Path, tmp_path: Path):
    return run_on_reference(scenario_path, root, tmp_path, worker=WORKER)


def test_target_is_declared() -> None:
    worker = load_targets().worker(WORKER)
    assert worker.kind == "command"
    assert {"patching", "versions", "retries", "ledger", "children", "events", "timers"} <= worker.capabilities
    # The SDK's CreateTimerAction has no origin and an indefinite wait reserves no timer.
    assert not {"timer_origins", "event_wait_timer", "adversary"} & worker.capabilities
    # TaskOptions.appID routes a call to another app; 1.17.1 has no history propagation API.
    assert "crossapp" in worker.capabilities
    assert not {"propagation", "propagated_events"} & worker.capabilities
    assert {g.requirement for g in worker.gaps} >= {"RPL-NDET-001", "VER-NA-001"}
    # Ids from 0, UUID child ids, Java error types: the worker's choice, never declared as gaps.
    assert not {"RPL-IDS-001", "CHILD-CREATE-001", "ACT-RESULT-001"} & {g.requirement for g in worker.gaps}
    assert all(g.evidence for g in worker.gaps), "every declared gap names its evidence"


# ------------------------------------------------------------------ scenarios through the harness


@pytest.mark.parametrize("scenario_id", ["activities/chain", "activities/fan-out-once-each",
                                         "crossapp/activity-and-child-on-other-app"])
def test_library_scenarios_pass(scenario_id: str, tmp_path: Path) -> None:
    _driver()
    root = REPO_ROOT / "scenarios"
    assert_passed(_run(root / f"{scenario_id}.yaml", root, tmp_path))


FEATURES = """\
    title: Most of the program language on durabletask-java, with Python's value semantics
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
          - any:
              - wait_event: never
              - timer: 10ms
            as: first
          - wait_event: {name: nothing, timeout: 50ms, default: {timed_out: true}}
            as: w
          - set_status: {stage: "${patched}", n: "${n}"}
          - wait_event: Go
            as: g
          - return:
              text: "n=${n} xs=${xs}"
              retried: "${retried}"
              first: "${first}"
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
      - raise: {event: Go, data: {ok: true}}
    expect:
      status: COMPLETED
      custom_status: '{"n":2.5,"stage":"new"}'
      output:
        text: 'n=2.5 xs=["a",{"a":[1,"x"],"z":1},"child got 2.5"]'
        retried: {times: 1, message: flaky}
        first: {index: 1, result: null}
        w: {timed_out: true}
        g: {ok: true}
        len: 3
      history:
        contains_in_order:
          - {WorkflowStarted: {version: {patches: [p1]}}}
          - {TaskScheduled: {name: fail, taskExecutionId: "${te}"}}
          - {TaskFailed: {failureDetails: {errorType: ActivityFailure, errorMessage: flaky}}}
          - TimerCreated
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


FAILURES = """\
    title: A fail step's type and a bad expression become the workflow's failure details
    requirements: [RPL-DET-001]
    programs:
      main:
        steps:
          - call_activity: {name: echo, input: "${input}"}
            as: x
          - fail: {message: "bad ${x}", type: app.errors.BusinessError}
      broken:
        steps:
          - return: {$sub: ["${input}", 1]}
    start: {workflow: main, input: 3}
    steps:
      - start: {workflow: broken, input: text, as: broken}
    expect:
      status: FAILED
      failure: {type: app.errors.BusinessError, message: "^bad 3$"}
      instances:
        broken:
          status: FAILED
          failure:
            type: ExpressionError
            message: "unsupported operand type\\\\(s\\\\) for -: 'str' and 'int'"
"""


def test_failure_types_and_expression_errors(tmp_path: Path) -> None:
    _driver()
    assert_passed(_run(*write_scenario(tmp_path, folder=FOLDER, name="failures", text=FAILURES), tmp_path))


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


INEXPRESSIBLE = """\
    title: A retry without a first delay, which RetryPolicy cannot take
    requirements: [ACT-RETRY-001]
    requires: [retries]
    programs:
      main:
        steps:
          - call_activity: {name: fail, input: 1, retry: {max_attempts: 2, first_delay: 0}}
    start: {workflow: main}
    expect:
      status: COMPLETED
"""


def test_harness_reports_a_refused_scenario_as_not_applicable(tmp_path: Path) -> None:
    _driver()
    result = _run(*write_scenario(tmp_path, folder=FOLDER, name="inexpressible", text=INEXPRESSIBLE), tmp_path)
    assert result.outcome == Outcome.NOT_APPLICABLE, f"{result.outcome.value}\n{result.message}"
    assert "$.programs.main.steps[0].call_activity.retry.first_delay" in result.gap_reason


# ------------------------------------------------------------------ the driver process


def test_refuses_a_step_the_sdk_cannot_express(tmp_path: Path) -> None:
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [
        {"call_activity": {"name": "echo", "input": 1}},
        {"if": {"cond": True, "then": [
            {"call_activity": {"name": "fail", "input": 1, "retry": {"max_attempts": 2, "first_delay": 0}}}]}},
        {"fail": {"message": "x", "type": "java.lang.Boom"}},
    ]}})
    # canonical_bundle() made its canonical form, so the language accepts it; only the Java SDK cannot express it.
    # The sidecar address is never dialled: the bundle is refused first.
    proc = _drive("--sidecar", "127.0.0.1:1", "--canonical", str(bundle))
    assert proc.returncode == EXIT_GAP, proc.stderr
    assert "$.programs.main.steps[1].if.then[0].call_activity.retry.first_delay" in proc.stderr
    assert "$.programs.main.steps[2].fail.type" in proc.stderr
    assert proc.stdout == ""


def test_retry_timeout_is_passed_and_one_below_first_delay_is_refused(tmp_path: Path) -> None:
    """`retry.timeout` is RetryPolicy.setRetryTimeout; one below first_delay, which the SDK refuses, is a gap."""
    _driver()
    assert "retry_timeout" in load_targets().worker(WORKER).capabilities
    assert_passed(_run(*write_scenario(tmp_path, folder=FOLDER, name="retry-timeout", text=RETRY_TIMEOUT), tmp_path))
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [
        {"call_activity": {"name": "fail", "input": 1, "retry": {"max_attempts": 3, "first_delay": "1s", "timeout": "500ms"}}}]}})
    proc = _drive("--sidecar", "127.0.0.1:1", "--canonical", str(bundle))
    assert proc.returncode == EXIT_GAP, proc.stderr
    assert "$.programs.main.steps[0].call_activity.retry.timeout" in proc.stderr


def test_refuses_propagation_but_not_app(tmp_path: Path) -> None:
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [
        {"call_activity": {"name": "echo", "input": 1, "app": "other"}},
        {"call_child": {"workflow": "c", "app": "other", "propagation": "lineage"}},
        {"call_activity": {"name": "echo", "propagation": "own"}},
        {"call_activity": {"name": "propagated"}},
    ]}, "c": {"steps": []}})
    proc = _drive("--sidecar", "127.0.0.1:1", "--canonical", str(bundle))
    assert proc.returncode == EXIT_GAP, proc.stderr
    for path in ("steps[1].call_child.propagation", "steps[2].call_activity.propagation",
                 "steps[3].call_activity.name"):
        assert f"$.programs.main.{path}" in proc.stderr, path
    assert "steps[0]" not in proc.stderr and ".app" not in proc.stderr  # app maps onto TaskOptions.appID


def test_refuses_an_unknown_language_extension(tmp_path: Path) -> None:
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [{"return": 1}]}})
    doc = json.loads(bundle.read_text(encoding="utf-8"))
    doc["programs"]["main"]["versions"][0]["steps"].insert(0, {"step": "sleep_until", "as": None})
    bundle.write_text(json.dumps(doc), encoding="utf-8")
    proc = _drive("--sidecar", "127.0.0.1:1", "--canonical", str(bundle))
    assert proc.returncode == EXIT_GAP, proc.stderr
    assert "$.programs.main.steps[0].sleep_until" in proc.stderr and '"sleep_until"' in proc.stderr


def test_usage_and_bundle_errors_exit_2(tmp_path: Path) -> None:
    good = str(canonical_bundle(tmp_path, {"m": {"steps": []}}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"programs": {"m": {"steps": [{"timer": "1s"}]}}}), encoding="utf-8")  # not canonical
    for argv in ([], ["--sidecar", "nonsense", "--canonical", good],
                 ["--sidecar", "127.0.0.1:1", "--canonical", str(tmp_path / "missing.json")],
                 ["--sidecar", "127.0.0.1:1", "--canonical", str(bad)]):
        proc = _drive(*argv)
        assert proc.returncode == EXIT_USAGE, (argv, proc.stderr)
    assert "not the canonical program form" in proc.stderr


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
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
    finally:
        sidecar.stop()


def test_cannot_connect_exits_4(tmp_path: Path) -> None:
    bundle = canonical_bundle(tmp_path, {"main": {"steps": [{"return": 1}]}})
    proc = _drive("--sidecar", "127.0.0.1:1", "--canonical", str(bundle), "--ready-timeout", "1")
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout == ""


# ------------------------------------------------------------------ Python semantics, differentially


def _check(mode: str, lines: list[str]) -> list[str]:
    _driver()
    # The launcher's java is the one the build used; the first line of the stamp names it.
    java = (JAR.parent / ".stamp").read_text(encoding="utf-8").split()[2]
    proc = subprocess.run([java, "-cp", str(JAR), "taskhub.driver.Check", mode], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _values() -> list[object]:
    rnd = random.Random(20260101)
    values: list[object] = [
        0.1, 1e16, 1e15, 1e-5, 1e-4, 123456789.123, 5e-324, 1.7976931348623157e308, -0.0, 0.0, 1e22, 1e23,
        2.0 ** 53, 9007199254740993, -12, 10 ** 30, True, False, None, math.inf, -math.inf,
        "h\u00e9llo \u2603 \U0001F600 \x00\x1f\x7f \"q\" \\ / \t\n\r\b\f", "", [], {},
        [1, [2, {"a": None}]], {"z": 1, "a": [1.0, "x"], "\u00e9": {}},
    ]
    values += [rnd.uniform(-1e6, 1e6) for _ in range(300)]
    values += [rnd.random() * 10.0 ** rnd.randint(-30, 30) for _ in range(300)]
    return values


def test_json_text_is_the_languages(tmp_path: Path) -> None:
    """Jackson's JSON of each value (keys sorted, ECMAScript numbers) is the language's text of it."""
    lines = [json.dumps(v) for v in _values()]
    assert _check("json", lines) == [P.text([v])[1:-1] for v in _values()]
    assert _check("str", lines) == [P.text([P.text(v)])[1:-1] for v in _values()]


EXPRESSIONS: list[object] = [
    "${input}", "${input.a.0}", "${input.a.-1}", "${input.a.3}", "n=${xs}", "${nope}", "${ input.s }",
    "a ${input.s} b ${input.n} c ${input.d}", "${input.a.x}",
    {"$add": [1, 2.5]}, {"$add": ["a", 1, None]}, {"$add": []}, {"$add": 3}, {"$add": {"k": 1, "j": 2}},
    {"$add": [[1], [2]]}, {"$add": [True, True]}, {"$add": [0.1, 0.2]}, {"$add": [10 ** 20, 10 ** 20]},
    {"$sub": [5, 2.5]}, {"$sub": ["a", 1]}, {"$sub": [1]}, {"$sub": 3}, {"$sub": {"a": 1}},
    {"$lt": [1, "a"]}, {"$le": ["a", "b"]}, {"$lt": [[1, 2], [1, 3]]}, {"$lt": [None, None]},
    {"$lt": [2 ** 53 + 1, 2.0 ** 53]}, {"$eq": [1, 1.0]}, {"$eq": [{"a": [1]}, {"a": [1.0]}]}, {"$eq": ["1", 1]},
    {"$not": []}, {"$len": "h\u00e9\U0001F600"}, {"$len": 5}, {"$sum": [1, 2, 3.5]}, {"$sum": ["a"]},
    {"$concat": ["a", 1, None, [1, 2], {"b": True}, 1.5]}, {"$concat": 7},
    {"k": {"$add": ["${input.s}", "${z}"]}, "l": [{"$not": "${input.n}"}]},
]


def test_expressions_are_pythons() -> None:
    env = {"input": {"a": [1, 2, 3], "s": "x", "n": None, "d": {"k": 1}}, "xs": [1, 2.5, True], "z": 0}
    from taskhub_programs.expressions import canonical_expr

    got = _check("eval", [json.dumps({"expr": canonical_expr(e), "env": env}) for e in EXPRESSIONS])
    for expr, line in zip(EXPRESSIONS, got, strict=True):
        try:
            want = {"value": P.evaluate(expr, env)}
        except P.ExpressionError:
            want = {"error": "ExpressionError"}  # its message is informative only (docs/programs.md)
        got_line = json.loads(line)
        if "error" in got_line:
            got_line["error"] = got_line["error"][0]
        assert got_line == want, expr


def test_values_match_the_golden_file() -> None:
    """Check golden: every expression of tests/programs/golden/programs.json, and its canonical programs."""
    out = _check("golden", [str(REPO_ROOT / "tests" / "programs" / "golden" / "programs.json")])
    assert out and out[-1].endswith(" 0 mismatch(es)"), "\n".join(out)


def test_install_script_is_idempotent() -> None:
    _driver()
    env = dict(os.environ, OFFLINE="1")  # a built driver needs neither Maven nor the network
    proc = subprocess.run([str(REPO_ROOT / "scripts" / "install-java-driver.sh")], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "already built" in proc.stderr
