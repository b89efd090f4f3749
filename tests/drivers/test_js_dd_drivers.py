"""The durabletask-dapr (dd) and @dapr/durabletask-js (jsdapr) drivers, end to end and against the reference.

- Scenarios from `scenarios/` run through the real harness (`run_scenario`) on the pair
  reference sidecar + driver: PASSED, or NOT_APPLICABLE / NOT_IMPLEMENTED with the reason the
  driver's target.yaml declares.
- Each driver starts with the example bundle (the programs its SDK can express) and refuses an
  inexpressible step with exit 3, naming the step's path.
- The JS driver reads the canonical form (docs/programs.md "The canonical form"); its values
  (drivers/durabletask_js/values.js) and built-in activities (activities.js) are checked against
  the golden file tests/programs/golden/programs.json, and against the Python evaluator and runner.

The SDKs must be installed (CI does it first): `scripts/install-sdks.sh dd` and
`scripts/install-js.sh`. A missing install fails with that hint; nothing is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.events import Outcome
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_scenario
from conformance.targets.process import ManagedProcess, ProcessSpec
from conformance.targets.reference import start_reference_sidecar
from conformance.targets.registry import load_targets

pytestmark = pytest.mark.sdk

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = REPO_ROOT / "scenarios"
DD_PYTHON = REPO_ROOT / ".sdk" / "dd" / "bin" / "python"
DD_DRIVER = REPO_ROOT / "drivers" / "durabletask_dapr" / "driver.py"
JS_DIR = REPO_ROOT / "drivers" / "durabletask_js"
JS_DRIVER = JS_DIR / "driver.js"
EXAMPLE_BUNDLE = REPO_ROOT / "taskhub_programs" / "examples" / "bundle.yaml"
GOLDEN = REPO_ROOT / "tests" / "programs" / "golden" / "programs.json"
TIMEOUT_S = 60


def _need_dd() -> None:
    if not DD_PYTHON.exists() or not (DD_PYTHON.parent.parent / ".installed").exists():
        pytest.fail(f"durabletask-dapr is not installed ({DD_PYTHON} missing): run scripts/install-sdks.sh dd",
                    pytrace=False)


def _need_js() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: install Node.js >= 20, then run scripts/install-js.sh", pytrace=False)
    if not (JS_DIR / "node_modules" / "@dapr" / "durabletask-js" / "package.json").exists():
        pytest.fail(f"@dapr/durabletask-js is not installed in {JS_DIR / 'node_modules'}: run scripts/install-js.sh",
                    pytrace=False)


NEED = {"durabletask-dapr": _need_dd, "durabletask-js": _need_js}


def _driver_argv(worker: str, *, sidecar: str, programs: Path) -> list[str]:
    if worker == "durabletask-dapr":
        return [str(DD_PYTHON), str(DD_DRIVER), "--sidecar", sidecar, "--programs", str(programs)]
    from taskhub_programs import canonical_form

    canonical = programs.with_suffix(".canonical.json")  # what the harness writes as {canonical}
    canonical.write_text(json.dumps(canonical_form(json.loads(programs.read_text(encoding="utf-8"))["programs"])),
                         encoding="utf-8")
    return ["node", str(JS_DRIVER), "--sidecar", sidecar, "--canonical", str(canonical)]


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(REPO_ROOT), "CONFORMANCE_LEDGER": str(tmp_path / "ledger.jsonl")})
    env.pop("DAPR_API_TOKEN", None)
    return env


# ------------------------------------------------------------------ scenarios through the harness

# (worker, scenario id, expected outcome). NOT_APPLICABLE: the target lacks a capability.
CASES = [
    ("durabletask-dapr", "activities/chain", Outcome.PASSED),
    ("durabletask-dapr", "activities/fan-out-once-each", Outcome.PASSED),
    ("durabletask-dapr", "activities/retries-exhausted-fail-workflow", Outcome.PASSED),
    ("durabletask-dapr", "events/buffered-before-wait", Outcome.PASSED),
    ("durabletask-dapr", "patching/first-turn-reports-patch", Outcome.PASSED),
    ("durabletask-dapr", "versioning/latest-version-pinned", Outcome.PASSED),
    ("durabletask-js", "activities/chain", Outcome.PASSED),
    ("durabletask-js", "activities/fan-out-once-each", Outcome.PASSED),
    ("durabletask-js", "events/buffered-before-wait", Outcome.PASSED),
    ("durabletask-js", "children/default-child-id-and-parent", Outcome.PASSED),
    ("durabletask-js", "activities/retries-exhausted-fail-workflow", Outcome.NOT_APPLICABLE),
    ("durabletask-js", "patching/first-turn-reports-patch", Outcome.NOT_APPLICABLE),
]


@pytest.mark.parametrize(("worker", "scenario_id", "expected"), CASES, ids=[f"{w}:{s}" for w, s, _ in CASES])
def test_scenario_through_the_harness(worker: str, scenario_id: str, expected: Outcome, tmp_path: Path) -> None:
    NEED[worker]()
    path = SCENARIOS / f"{scenario_id}.yaml"
    assert path.exists(), f"scenario {scenario_id} is gone from {SCENARIOS}; pick another one for this test"
    scenario = load_scenario(path, root=SCENARIOS)
    pair = load_targets().pair("reference", worker)
    result = run_scenario(scenario, pair, work_root=tmp_path,
                          reproduce=f"conformance run --worker {worker} --scenario {scenario_id}")
    assert result.outcome == expected, f"{scenario_id} on {worker}: {result.outcome.value}\n{result.message}"
    if expected in (Outcome.NOT_APPLICABLE, Outcome.KNOWN_FAILURE):
        assert result.gap_reason, "a skipped outcome must say why"
    if expected == Outcome.KNOWN_FAILURE:
        declared = {g.requirement for g in pair.worker.gaps}
        assert any(r in declared for r in scenario.requirements)


def test_targets_declare_the_drivers() -> None:
    targets = load_targets()
    dd = targets.worker("durabletask-dapr")
    js = targets.worker("durabletask-js")
    assert {"patching", "versions", "retries", "task_execution_id"} <= dd.capabilities
    assert not {"patching", "versions", "retries", "task_execution_id", "adversary"} & js.capabilities
    for target in (dd, js):
        assert target.starter is not None
        for gap in target.gaps:
            assert gap.reason and gap.evidence, f"{target.name}: gap {gap.requirement} needs reason and evidence"


# ------------------------------------------------------------------ start-up and refusal


def _example_bundle(tmp_path: Path, *, drop: tuple[str, ...] = ()) -> Path:
    doc = yaml.safe_load(EXAMPLE_BUNDLE.read_text(encoding="utf-8"))
    for name in drop:
        del doc["programs"][name]
    out = tmp_path / "bundle.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    return out


# The programs of the example bundle each SDK cannot express.
INEXPRESSIBLE = {"durabletask-dapr": (), "durabletask-js": ("patched", "retry", "versioned")}


@pytest.mark.parametrize("worker", ["durabletask-dapr", "durabletask-js"])
def test_driver_connects_with_the_expressible_example_bundle(worker: str, tmp_path: Path) -> None:
    NEED[worker]()
    sidecar = start_reference_sidecar(options={}, work_dir=tmp_path)
    try:
        bundle = _example_bundle(tmp_path, drop=INEXPRESSIBLE[worker])
        proc = ManagedProcess.start(spec=ProcessSpec(
            name=worker, argv=tuple(_driver_argv(worker, sidecar=sidecar.address, programs=bundle)),
            log_dir=tmp_path, env=_env(tmp_path), cwd=REPO_ROOT))
        try:
            proc.wait_for_line(r"^connected to ", timeout=TIMEOUT_S)
        finally:
            code = proc.stop(timeout=15)
        assert code == 0, f"{worker} did not exit 0 on SIGTERM (exit {code}):\n{proc.stderr_tail()}"
    finally:
        sidecar.stop()


@pytest.mark.parametrize("worker", ["durabletask-dapr", "durabletask-js"])
def test_driver_refuses_an_inexpressible_step(worker: str, tmp_path: Path) -> None:
    NEED[worker]()
    if worker == "durabletask-dapr":
        programs = {"main": {"steps": [{"all": [{"wait_event": {"name": "go", "timeout": "1s"}}, {"timer": 1}]}]}}
        expected = ["$.programs.main.steps[0].all[0].wait_event"]
    else:
        programs = {
            "main": {"steps": [{"if_patched": {"patch": "p1"}}]},
            "retrying": {"steps": [{"call_activity": {"name": "fail",
                                                      "retry": {"max_attempts": 2, "first_delay": 1}}}]},
            "versioned": {"versions": {"v1": {"steps": [{"return": 1}]}}},
        }
        expected = ["$.programs.main.steps[0].if_patched", "$.programs.retrying.steps[0].call_activity.retry",
                    "$.programs.versioned.versions"]
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"programs": programs}), encoding="utf-8")
    # No sidecar: the refusal comes before any connection attempt.
    done = subprocess.run(_driver_argv(worker, sidecar="127.0.0.1:9", programs=bundle), capture_output=True,
                          text=True, env=_env(tmp_path), cwd=REPO_ROOT, timeout=TIMEOUT_S)
    assert done.returncode == 3, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    assert "connected to" not in done.stdout
    for path in expected:
        assert path in done.stderr, f"{path} not named in:\n{done.stderr}"


def test_js_driver_rejects_a_file_that_is_not_the_canonical_form(tmp_path: Path) -> None:
    _need_js()
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"programs": {"main": {"steps": [{"timer": "1s"}]}}}), encoding="utf-8")
    for path, says in ((bundle, "is not the canonical program form"), (tmp_path / "missing.json", "cannot read")):
        done = subprocess.run(["node", str(JS_DRIVER), "--sidecar", "127.0.0.1:9", "--canonical", str(path)],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        assert done.returncode == 2 and says in done.stderr and "    at " not in done.stderr, done.stderr  # no stack


def test_js_values_match_the_golden_file() -> None:
    _need_js()
    done = subprocess.run(["node", str(JS_DIR / "test" / "golden.js"), str(GOLDEN)], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 mismatch(es)" in done.stdout


# ------------------------------------------------------------------ the JS port against the Python reference

ENV = {"input": 0, "instance_id": "wf-1", "xs": [1, 2, 3], "s": "héllo", "d": {"a": 1, "b": [True, None]},
       "f": 2.5, "e": "", "u": "tab\t\"q\" \\ ü 😀", "big": 10000000000000000}

EXPRESSIONS: list[Any] = [
    "plain", "${xs}", "n=${xs}", "${d}", "x ${d} y", "${d.b.0}", "${xs.-1}", "${xs.3}", "${nope}", "${d.zz}",
    "${ s }", "a${s}b", "f=${f}", "u=${u}", "${u}", "${big}", "big=${big}", "${input}", "${e}", "${d.b}",
    {"$add": [1, 2]}, {"$add": [1, 2.5]}, {"$add": ["a", 1, [1, 2], {"k": "v"}, None, True]}, {"$add": "${s}"},
    {"$add": "${d}"}, {"$add": 5}, {"$add": [1, None]}, {"$add": []}, {"$add": [True, True]},
    {"$sub": [5, 3]}, {"$sub": [1.5, 1]}, {"$sub": ["a", 1]}, {"$sub": [1]}, {"$sub": "${d}"}, {"$sub": 5},
    {"$sub": [True, 1]}, {"$sub": "ab"},
    {"$lt": [1, 2]}, {"$lt": ["a", "b"]}, {"$lt": [[1, 2], [1, 3]]}, {"$lt": [None, 1]}, {"$le": [2, 2]},
    {"$lt": ["a", 1]}, {"$lt": [{"a": 1}, {"a": 1}]}, {"$le": [[1], [1, 0]]}, {"$lt": ["é", "z"]},
    {"$eq": [1, 1.0]}, {"$eq": [True, 1]}, {"$eq": [[1, {"a": 2}], [1, {"a": 2}]]}, {"$eq": ["1", 1]},
    {"$eq": [None, None]}, {"$eq": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}, {"$eq": [[], {}]},
    {"$not": 0}, {"$not": ""}, {"$not": []}, {"$not": {}}, {"$not": "x"}, {"$not": None}, {"$not": 0.0},
    {"$len": "${s}"}, {"$len": [1, 2]}, {"$len": {"a": 1}}, {"$len": 3}, {"$len": "😀"}, {"$len": None},
    {"$sum": [1, 2, 3]}, {"$sum": []}, {"$sum": ""}, {"$sum": "ab"}, {"$sum": {}}, {"$sum": 5},
    {"$sum": [0.1, 0.2]}, {"$sum": "${xs}"},
    {"$concat": ["a", 1, 2.5, None, True, [1, "x"], {"k": "ü"}]}, {"$concat": "${s}"}, {"$concat": 5},
    {"$concat": [1e-05, 0.0001, 123456789.5, -0.5, 2.5e-07, 3.14, 1.5e-300, 0.1, 1.0, 1.5e+300]},
    {"$concat": ["n=", {"$add": ["${input}", 1]}]}, {"k": {"$add": [1, 2]}, "l": ["${input}", "${d.a}"]},
    {"$concat": [{"k": "é\n\"\\\u0001\u007f"}]}, {"$not": {"$eq": ["${input}", 0]}},
]

_JS_EVAL = r"""
const V = require(process.argv[1] + "/values.js");
const text = require("fs").readFileSync(0, "utf-8");
const { env, nodes } = JSON.parse(text);
const out = nodes.map((node) => {
  try { return { ok: V.json(V.evaluate(node, env)) }; }
  catch (err) { return { error: err.constructor.name }; }
});
process.stdout.write(JSON.stringify(out));
"""


def _node(script: str, payload: Any) -> Any:
    done = subprocess.run(["node", "-e", script, str(JS_DIR)], input=json.dumps(payload), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_js_expressions_match_the_python_evaluator() -> None:
    _need_js()
    from taskhub_programs import ExpressionError, evaluate, text
    from taskhub_programs.expressions import canonical_expr

    got = _node(_JS_EVAL, {"env": ENV, "nodes": [canonical_expr(e) for e in EXPRESSIONS]})
    mismatches = []
    for expr, js in zip(EXPRESSIONS, got):
        try:
            want: dict[str, Any] = {"ok": text([evaluate(expr, ENV)])[1:-1]}  # the value's JSON text
        except ExpressionError:
            want = {"error": "ExpressionError"}  # the message is informative only (docs/programs.md)
        if js != want:
            mismatches.append(f"{json.dumps(expr)}:\n    python {want}\n    js     {js}")
    assert not mismatches, f"{len(mismatches)} expression(s) differ:\n" + "\n".join(mismatches)


# (activity, input, attempts): every attempt of one logical call, in order.
ACTIVITY_CASES: list[tuple[str, Any, int]] = [
    ("echo", {"a": [1, "x"]}, 1),
    ("echo", None, 1),
    ("fail", {"times": 2, "message": "m"}, 3),
    ("fail", {"times": 1}, 2),
    ("fail", 1, 2),
    ("fail", {"times": "2"}, 3),
    ("fail", {"times": 1, "message": {"a": [1, "x", None, True]}}, 2),
    ("fail", {"message": "never"}, 1),
    ("fail", {"times": None}, 1),
    ("fail", "abc", 1),
    ("fail", None, 1),
    ("fail", 1.7, 2),
    ("sleep", None, 1),
    ("sleep", "0.01", 1),
    ("sleep", "x", 1),
    ("sleep", [1], 1),
    ("nope", 1, 1),
]

_JS_ACTIVITIES = r"""
const { ActivityRunner, ActivityFailure } = require(process.argv[1] + "/activities.js");
const cases = JSON.parse(require("fs").readFileSync(0, "utf-8"));
(async () => {
  const out = [];
  for (const [i, [name, input, attempts]] of cases.entries()) {
    const runner = new ActivityRunner();
    for (let a = 0; a < attempts; a++) {
      try {
        out.push({ ok: await runner.run({ name, input, instanceId: "wf", taskId: i, taskExecutionId: "" }) ?? null });
      } catch (e) {
        if (!(e instanceof ActivityFailure)) throw e;
        out.push({ error: e.errorType, message: e.message });
      }
    }
  }
  process.stdout.write(JSON.stringify(out));
})();
"""


def test_js_builtin_activities_match_the_python_runner() -> None:
    _need_js()
    from fake_worker.activities import ActivityFailure, ActivityRunner

    want: list[dict[str, Any]] = []
    for i, (name, input_, attempts) in enumerate(ACTIVITY_CASES):
        runner = ActivityRunner()
        for _ in range(attempts):
            try:
                want.append({"ok": runner.run(name=name, input=input_, instance_id="wf", task_id=i,
                                              task_execution_id="")})
            except ActivityFailure as exc:
                want.append({"error": exc.error_type, "message": str(exc)})
    got = _node(_JS_ACTIVITIES, ACTIVITY_CASES)
    assert got == want


_JS_RECORD = r"""
const { ActivityRunner } = require(process.argv[1] + "/activities.js");
const { ledger } = JSON.parse(require("fs").readFileSync(0, "utf-8"));
const runner = new ActivityRunner({ ledger });
runner.run({ name: "record", input: { k: ["é", 1.5, null] }, instanceId: "wf-1", taskId: 3, taskExecutionId: "" });
runner.run({ name: "record", input: 7, instanceId: "wf-1", taskId: 3, taskExecutionId: "" });
try { new ActivityRunner().run({ name: "record", input: 1, instanceId: "i", taskId: 1, taskExecutionId: "" }); }
catch (e) { process.stdout.write(JSON.stringify([e.errorType, e.message])); }
"""


def test_js_record_writes_python_ledger_lines(tmp_path: Path) -> None:
    _need_js()
    from fake_worker.activities import ActivityFailure, ActivityRunner

    js_ledger = tmp_path / "js.jsonl"
    env_backup = os.environ.pop("CONFORMANCE_LEDGER", None)
    try:
        missing = _node(_JS_RECORD, {"ledger": str(js_ledger)})
        with pytest.raises(ActivityFailure) as py_missing:
            ActivityRunner().run(name="record", input=1, instance_id="i", task_id=1, task_execution_id="")
    finally:
        if env_backup is not None:
            os.environ["CONFORMANCE_LEDGER"] = env_backup
    assert missing == [py_missing.value.error_type, str(py_missing.value)]

    py_ledger = tmp_path / "py.jsonl"
    runner = ActivityRunner(ledger=str(py_ledger))
    runner.run(name="record", input={"k": ["é", 1.5, None]}, instance_id="wf-1", task_id=3, task_execution_id="")
    runner.run(name="record", input=7, instance_id="wf-1", task_id=3, task_execution_id="")
    js_lines = js_ledger.read_text(encoding="utf-8").splitlines()
    py_lines = py_ledger.read_text(encoding="utf-8").splitlines()
    assert len(js_lines) == len(py_lines) == 2
    for js_line, py_line in zip(js_lines, py_lines):
        js_rec, py_rec = json.loads(js_line), json.loads(py_line)
        assert list(js_rec) == list(py_rec)  # same keys in the same order
        assert isinstance(js_rec["time"], float) and isinstance(js_rec["worker_pid"], int)
        for key in ("worker_pid", "time"):
            js_rec.pop(key), py_rec.pop(key)
        assert js_rec == py_rec
