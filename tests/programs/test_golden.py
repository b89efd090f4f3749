"""The canonical program form and the expression semantics, pinned by tests/programs/golden/programs.json.

The golden file is what every driver's test reads (docs/programs.md, "The canonical form"); here the
Python side: the file is current (made by the functions of taskhub_programs from
tests/programs/golden_cases.py), the one evaluator gives each canonical expression the recorded
outcome, every step has exactly the shape of its kind, and every scenario's programs have a
canonical form.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import taskhub_programs as P
from fake_worker.activities import ActivityFailure, ActivityRunner, builtin
from tests.programs.golden_cases import GOLDEN, build

ROOT = Path(__file__).resolve().parents[2]
DOC = json.loads(GOLDEN.read_text(encoding="utf-8"))

# One shape per step kind: exactly these keys (docs/programs.md, "The canonical form").
ROUTING_KEYS = {"app", "propagation"}
SHAPES = {
    "call_activity": {"step", "name", "input", "retry", "as"},
    "call_child": {"step", "workflow", "input", "instance_id", "retry", "as"},
    "spawn": {"step", "workflow", "input", "instance_id", "as"},
    "timer": {"step", "duration", "as"},
    "wait_event": {"step", "name", "timeout", "default", "as"},
    "all": {"step", "tasks", "as"},
    "any": {"step", "tasks", "as"},
    "if_patched": {"step", "patch", "then", "else"},
    "if": {"step", "cond", "then", "else"},
    "set": {"step", "var", "value"},
    "set_status": {"step", "value"},
    "continue_as_new": {"step", "input", "carry_events"},
    "return": {"step", "value"},
    "fail": {"step", "message", "type"},
}
NODES = {"lit", "int", "float", "list", "map", "var", "text", "op"}


def test_the_golden_file_is_current():
    fresh = build(evaluate=P.evaluate, error=P.ExpressionError, canonical_form=P.canonical_form,
                  canonical_expr=P.canonical_expr, text=P.text, builtin=builtin, failure=ActivityFailure)
    assert json.loads(json.dumps(fresh)) == DOC, (
        "tests/programs/golden/programs.json is stale: regenerate it with `python -m tests.programs.golden_cases` "
        "and review the diff (a changed outcome changes what every driver must do)")


@pytest.mark.parametrize("case", DOC["expressions"], ids=lambda c: json.dumps(c["expr"])[:60])
def test_each_canonical_expression_has_its_recorded_outcome(case: dict[str, Any]):
    env = DOC["env"]
    run = P.compile_node(case["canonical"])
    if "error" in case:
        with pytest.raises(P.ExpressionError):
            run(env)
        return
    value = run(env)
    assert P.text(value) == case["text"]  # the text pins number forms and key order too
    assert P.truthy(value) is case["truthy"]


def test_outcomes_that_pin_the_semantics():
    """A few outcomes written by hand, so a regenerated file cannot quietly change them."""
    by_expr = {json.dumps(c["expr"]): c for c in DOC["expressions"]}

    def text_of(expr: Any) -> str:
        return by_expr[json.dumps(expr)]["text"]

    assert text_of("n=${xs}") == "n=[1,2,3]"
    assert text_of({"$add": [1, 2.0]}) == "3"
    assert text_of({"$add": ["a", 1, [1, 2]]}) == "a1[1,2]"
    assert text_of("${m}!") == '{"1":"one","a":null,"z":1}!'
    assert text_of("${s} and ${t} and ${none}") == "h\u00e9llo and true and null"
    assert text_of({"$concat": ["a", 1, None, {"k": [1]}, 2.0]}) == 'a1null{"k":[1]}2'
    assert text_of({"$eq": [1, 1.0]}) == "true"
    assert by_expr[json.dumps({"$not": []})]["value"] is True
    assert by_expr[json.dumps(1e16)]["text"] == "10000000000000000"
    assert text_of([1e15, 1e16, 1.5e-07, 2.5e20, 0.0001, 0.00001, 1e-7, 1e21, 123456789012345678, 100.0, 1e300, 0.1]) \
        == "[1000000000000000,10000000000000000,1.5e-7,250000000000000000000,0.0001,0.00001,1e-7,1e+21," \
           "123456789012345680,100,1e+300,0.1]"
    assert text_of({"b": {"d": 1, "c": [{"z": 0, "y": 1}]}, "a": 2, "B": 3}) == '{"B":3,"a":2,"b":{"c":[{"y":1,"z":0}],"d":1}}'
    assert by_expr[json.dumps({"$lt": [1, "a"]})]["error"] == "ExpressionError"
    assert by_expr[json.dumps("${input.a.-4}")]["error"] == "ExpressionError"


def test_the_text_is_what_json_stringify_writes():
    """The text of every value of the golden file is JSON.stringify's with sorted keys (docs/programs.md
    "Text"): standard JSON encoders produce it, so no driver imitates the reference's language."""
    node = shutil.which("node")
    assert node, "node is not on PATH (install Node.js >= 20)"
    values = [c["value"] for c in DOC["expressions"] if "value" in c and not isinstance(c["value"], str)]
    script = ("const vs = JSON.parse(require('fs').readFileSync(0, 'utf-8'));"
              "const sorted = (k, v) => v && typeof v === 'object' && !Array.isArray(v) ? "
              "Object.fromEntries(Object.entries(v).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)) : v;"
              "process.stdout.write(JSON.stringify(vs.map((v) => JSON.stringify(v, sorted))));")
    done = subprocess.run([node, "-e", script], input=json.dumps(values), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [P.text(v) for v in values]


def test_each_built_in_activity_has_its_recorded_outcome(tmp_path: Path):
    """The reference worker's runner, execution by execution of one call (the golden file's `activities`)."""
    seen = set()
    for case in DOC["activities"]:
        runner = ActivityRunner(ledger=str(tmp_path / "ledger.jsonl"))
        for attempt, want in enumerate(case["executions"], start=1):
            seen.add(case["activity"])
            call = dict(name=case["activity"], input=case["input"], instance_id="wf", task_id=1,
                        task_execution_id="teid")
            if "error_type" in want:
                with pytest.raises(ActivityFailure) as err:
                    runner.run(**call)
                assert (err.value.error_type, str(err.value)) == (want["error_type"], want["error_message"])
            else:
                assert runner.run(**call) == want["result"], (case, attempt)
    assert seen == set(P.BUILTIN_ACTIVITIES)
    lines = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(x["instance_id"], x["task_execution_id"], x["attempt"], x["input"]) for x in lines] == \
        [("wf", "teid", 1, {"k": 1.5}), ("wf", "teid", 2, {"k": 1.5})]


def _walk_steps(steps: list[dict[str, Any]], where: str):
    for i, step in enumerate(steps):
        here = f"{where}[{i}]"
        yield here, step
        for key in ("tasks", "then", "else"):
            if key in step:
                yield from _walk_steps(step[key], f"{here}.{key}")


def _walk_nodes(node: Any, where: str):
    assert isinstance(node, dict) and len(set(node) & NODES) == 1, f"{where}: not a canonical node: {node!r}"
    yield where, node
    if "list" in node:
        for i, v in enumerate(node["list"]):
            yield from _walk_nodes(v, f"{where}.list[{i}]")
    elif "map" in node:
        for k, v in node["map"]:
            yield from _walk_nodes(v, f"{where}.map.{k}")
    elif "text" in node:
        for i, v in enumerate(node["text"]):
            yield from _walk_nodes(v, f"{where}.text[{i}]")
    elif "op" in node:
        assert f"${node['op']}" in P.OPERATORS, where
        yield from _walk_nodes(node["arg"], f"{where}.arg")


def check_canonical(form: dict[str, Any]) -> None:
    assert (form["format"], form["version"]) == ("taskhub-programs/canonical", 1)
    for name, family in form["programs"].items():
        assert set(family) == {"default", "versions"}
        names = [v["name"] for v in family["versions"]]
        assert (family["default"] is None) == (names == [None]), name
        assert family["default"] is None or family["default"] in names, name
        for version in family["versions"]:
            for where, step in _walk_steps(version["steps"], f"{name}.{version['name']}"):
                # `app` and `propagation` appear only where set (a one-app form is unchanged by them).
                optional = ROUTING_KEYS if step["step"] in ("call_activity", "call_child") else set()
                assert set(step) - optional == SHAPES[step["step"]], f"{where}: {sorted(step)}"
                assert step.get("propagation") in (None, "own", "lineage"), where
                assert step.get("app") is None or isinstance(step["app"], str) and step["app"], where
                for key in ("input", "instance_id", "default", "cond", "value", "message"):
                    if step.get(key) is not None:
                        list(_walk_nodes(step[key], f"{where}.{key}"))
                for key in ("duration", "timeout"):
                    assert step.get(key) is None or isinstance(step[key], float), where
    assert json.loads(json.dumps(form)) == form  # plain JSON


def test_the_golden_programs_have_one_shape_per_step():
    check_canonical(DOC["canonical"])
    kinds = {step["step"] for fam in DOC["canonical"]["programs"].values() for v in fam["versions"]
             for _, step in _walk_steps(v["steps"], "")}
    assert kinds == set(SHAPES), f"the golden programs miss step kinds: {sorted(set(SHAPES) - kinds)}"


def test_shorthands_and_defaults_are_expanded():
    steps = DOC["canonical"]["programs"]["every_step"]["versions"][0]["steps"]
    assert steps[4] == {"step": "timer", "duration": 2.0, "as": None}
    assert steps[6] == {"step": "wait_event", "name": "go", "timeout": None, "default": None, "as": "g"}
    assert steps[7]["default"] == {"lit": None} and steps[7]["timeout"] == 3600.0
    assert steps[3]["retry"] == {"max_attempts": 2, "first_delay": 1.0, "backoff": 1.0, "max_delay": None}
    assert steps[14] == {"step": "fail", "message": {"text": [{"lit": "boom "}, {"var": "a", "path": []}]},
                         "type": "ProgramFailure"}
    assert steps[16] == {"step": "continue_as_new", "input": {"lit": None}, "carry_events": False}
    assert DOC["canonical"]["programs"]["versioned"]["default"] == "v2"  # the last name in sort order
    assert DOC["canonical"]["programs"]["child"] == {"default": None, "versions": [{"name": None, "steps": []}]}


def test_every_scenario_has_a_canonical_form():
    seen = 0
    for path in sorted((ROOT / "scenarios").rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("programs"), dict):
            check_canonical(P.canonical_form(doc["programs"], source=str(path)))
            seen += 1
    assert seen > 100


def test_a_bad_bundle_is_a_program_error():
    with pytest.raises(P.ProgramError) as err:
        P.canonical_form({"p": {"steps": [{"timer": "soon"}]}}, source="x.yaml")
    assert "$.programs.p.steps[0].timer.duration: 'soon' is not a duration" in str(err.value)


def test_the_language_loads_no_protobuf():
    """The Python SDK drivers import it beside their SDK's generated modules."""
    code = ("import sys, taskhub_programs; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('taskhub_wire', 'google', 'grpc', 'fake_worker', 'conformance')); print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_retry_timeout_is_in_the_canonical_form_only_where_set():
    def retry_of(retry: dict[str, Any]) -> dict[str, Any]:
        form = P.canonical_form({"main": {"steps": [{"call_activity": {"name": "fail", "retry": retry}}]}})
        return form["programs"]["main"]["versions"][0]["steps"][0]["retry"]

    assert "timeout" not in retry_of({"max_attempts": 2, "first_delay": 1})
    assert retry_of({"max_attempts": 2, "first_delay": 1, "timeout": "1m"})["timeout"] == 60.0
    assert retry_of({"max_attempts": 2, "first_delay": 1, "timeout": 0})["timeout"] == 0.0
