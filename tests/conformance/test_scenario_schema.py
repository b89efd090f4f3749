"""conformance/scenario/scenario.schema.json: valid, in step with the loader, and accepting every scenario.

The schema is for editors (yaml-language-server); the loader is the authority. Its step definitions
are generated from the step registry (conformance/scenario/schema.py), and the checked-in file must
equal the generated one. These tests keep the rest from drifting apart too: top-level keys, options
and enums must equal the loader's (and the registries it uses), every scenario file must validate,
and typical mistakes must be rejected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

from conformance.checks import CHECKS  # noqa: E402
from conformance.proxy.rules import ACTIONS as FAULT_ACTIONS  # noqa: E402
from conformance.proxy.rules import METHODS  # noqa: E402
from conformance.scenario import loader, schema  # noqa: E402
from conformance.scenario.steps import STEPS  # noqa: E402
from conformance.scenario.basics import STATUSES  # noqa: E402
from conformance.scenario.model import DIRECTIONS  # noqa: E402
from fake_worker.adversary import MODES  # noqa: E402
from taskhub_wire.kinds import ACTION_KINDS, EVENT_KINDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "conformance" / "scenario" / "scenario.schema.json"
PROGRAM_SCHEMA_PATH = ROOT / "taskhub_programs" / "program.schema.json"
SCENARIOS = ROOT / "scenarios"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
DEFS = SCHEMA["$defs"]


def _validator() -> Any:
    """A validator that resolves the schema's relative $ref to the program schema, as editors do."""
    from referencing import Registry, Resource

    registry = Registry().with_resources([
        (SCHEMA_PATH.as_uri(), Resource.from_contents(SCHEMA)),
        (PROGRAM_SCHEMA_PATH.as_uri(),
         Resource.from_contents(json.loads(PROGRAM_SCHEMA_PATH.read_text(encoding="utf-8")))),
    ])
    return jsonschema.Draft202012Validator({"$ref": SCHEMA_PATH.as_uri()}, registry=registry)


VALIDATOR = _validator()


def _errors(doc: Any) -> list[str]:
    out = []
    for err in sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        where = "/".join(map(str, err.absolute_path)) or "(top)"
        out.append(f"{where}: {err.message[:300]}")
    return out


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node and node["$ref"].startswith("#/$defs/"):
        node = DEFS[node["$ref"].removeprefix("#/$defs/")]
    return node


def _object_forms(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The object-shaped alternatives of a (possibly referenced, possibly oneOf) schema."""
    node = _resolve(node)
    if node.get("type") == "object":
        return [node]
    return [form for alt in node.get("oneOf", []) for form in _object_forms(alt)]


# ------------------------------------------------------------------------------------------ schema


def test_schema_is_a_valid_draft_2020_12_schema():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_checked_in_schema_is_the_generated_one():
    """Regenerate with `python -m conformance.scenario.schema` after changing a step kind."""
    assert schema.render(schema.generate(SCHEMA)) == SCHEMA_PATH.read_text(encoding="utf-8")


def test_the_generator_replaces_what_it_owns():
    stale = {**SCHEMA, "$defs": {**DEFS, "step": {"type": "object"}, "status": {"enum": ["DONE"]}}}
    fresh = schema.generate(stale)
    assert fresh["$defs"]["step"] == DEFS["step"] and fresh["$defs"]["status"] == DEFS["status"]
    assert list(fresh["$defs"]) == list(DEFS)  # in place, in the file's order


def test_step_kinds_equal_the_registry():
    step = DEFS["step"]
    kinds = set(step["properties"]) - {"expect_error"}
    assert kinds == set(STEPS)
    assert {tuple(alt["required"]) for alt in step["oneOf"]} == {(k,) for k in STEPS}


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_step_arguments_equal_the_registry(kind: str):
    forms = _object_forms(DEFS["step"]["properties"][kind])
    allowed = set(STEPS[kind].keys)
    if not allowed:  # no arguments: only null or an empty mapping
        assert all(form.get("maxProperties") == 0 for form in forms), kind
        return
    assert len(forms) == 1, f"{kind}: expected one mapping form, got {forms}"
    assert set(forms[0]["properties"]) == allowed
    assert forms[0]["additionalProperties"] is False
    scalar = STEPS[kind].scalar
    if scalar is not None:  # `- sleep: 1s` is short for `- sleep: {for: 1s}`: the bare form is the argument's
        bare = {k: v for k, v in forms[0]["properties"][scalar].items() if k != "description"}
        alternatives = DEFS["step"]["properties"][kind]["oneOf"]
        assert any(_resolve(alt) == _resolve(bare) for alt in alternatives if "properties" not in alt), kind


def test_top_level_keys_and_options_equal_the_loaders():
    assert set(SCHEMA["properties"]) == loader.TOP_KEYS
    assert set(SCHEMA["properties"]["sidecar"]["properties"]) == loader.SIDECAR_OPTIONS
    assert set(DEFS["start_spec"]["properties"]) == STEPS["start"].keys | {"expect_error"}
    assert set(SCHEMA["properties"]["ledger"]["properties"]) == {"ok", "lost", "duplicated", "unexpected",
                                                                   "executions"}


def test_enums_equal_the_registries():
    assert DEFS["status"]["enum"] == list(STATUSES)
    assert DEFS["grpc_code"]["enum"] == list(loader.GRPC_CODES)
    assert SCHEMA["properties"]["applies_to"]["items"]["enum"] == list(DIRECTIONS)
    assert set(SCHEMA["properties"]["checks"]["items"]["enum"]) == set(CHECKS)
    stall = DEFS["expectation"]["properties"]["stall"]["properties"]["reason"]["enum"]
    assert stall == list(loader.STALL_REASONS)
    assert DEFS["adversary_rule"]["oneOf"][0]["enum"] == list(MODES)
    assert DEFS["fault_rule"]["properties"]["action"]["enum"] == list(FAULT_ACTIONS)
    assert DEFS["fault_rule"]["properties"]["match"]["properties"]["rpc"]["enum"] == list(METHODS)
    assert DEFS["action_pattern"]["propertyNames"]["enum"] == list(ACTION_KINDS)
    assert DEFS["event_pattern"]["oneOf"][0]["enum"] == ["*", *EVENT_KINDS]


def test_expectation_keys_match_between_main_and_instances():
    main = set(SCHEMA["properties"]["expect"]["properties"]) - {"instances"}
    assert main == set(DEFS["expectation"]["properties"])


# --------------------------------------------------------------------------------------- scenarios

SCENARIO_FILES = sorted(SCENARIOS.rglob("*.yaml"))


def test_there_are_scenarios():
    assert len(SCENARIO_FILES) >= 60


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.relative_to(SCENARIOS).with_suffix("").as_posix())
def test_scenario_file_matches_the_schema(path: Path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    problems = _errors(doc)
    assert not problems, f"{path.relative_to(ROOT)} does not match scenario.schema.json:\n  " + "\n  ".join(problems)


# ----------------------------------------------------------------------------- typical mistakes

BASE: dict[str, Any] = {
    "title": "t",
    "requirements": ["RPL-DET-001"],
    "programs": {"main": {"steps": [{"return": "ok"}]}},
    "start": {"workflow": "main"},
    "expect": {"status": "COMPLETED", "output": "ok"},
}


def test_a_minimal_flow_and_a_minimal_vector_are_accepted():
    assert _errors(BASE) == []
    vector = {"kind": "vector", "requirements": ["RPL-IDS-001"], "programs": BASE["programs"],
              "vector": {"new": ["WorkflowStarted", {"ExecutionStarted": {"name": "main"}}],
                         "actions": [{"CompleteWorkflow": {"id": 1}}]}}
    assert _errors(vector) == []


@pytest.mark.parametrize("change, where", [
    ({"requirement": ["RPL-DET-001"]}, "(top)"),                                      # misspelt key
    ({"requirements": []}, "requirements"),                                           # none listed
    ({"requirements": ["rpl-det-1"]}, "requirements/0"),                              # not an id
    ({"applies_to": ["sdk"]}, "applies_to/0"),
    ({"steps": [{"sleep": "soon"}]}, "steps/0"),                                      # not a duration
    ({"steps": [{"raise": {"data": 1}}]}, "steps/0"),                                 # no event name
    ({"steps": [{"raise": {"event": "go"}, "wait": {"status": "RUNNING"}}]}, "steps/0"),  # two kinds
    ({"steps": [{"wait": {"status": "DONE"}}]}, "steps/0"),
    ({"steps": [{"suspend": {}, "expect_error": {"code": "NOPE"}}]}, "steps/0"),
    ({"steps": [{"call": {"rpc": "GetWorkItems", "request": {}}}]}, "steps/0"),      # a stream, not unary
    ({"steps": [{"start": {"workflow": "main", "expect_error": "NOT_FOUND"}}]}, "steps/0"),  # step-level only
    ({"steps": [{"stop_worker": {"now": True}}]}, "steps/0"),
    ({"faults": [{"match": {"rpc": "CompleteActivityTask"}, "action": "explode"}]}, "faults/0"),
    ({"faults": [{"action": "drop"}]}, "faults/0"),
    ({"worker": {"adversary": [{"mode": "zombie", "match": {"nth": 0}}]}}, "worker/adversary/0"),
    ({"sidecar": {"clock": "fast"}}, "sidecar/clock"),
    ({"checks": ["replay"]}, "checks/0"),
    ({"ledger": {"ok": -1}}, "ledger/ok"),
    ({"expect": {"status": "COMPLETED", "history": {"count": {"TaskDone": 1}}}}, "expect/history/count"),
    ({"expect": {"stall": {"reason": "TOO_BIG"}}}, "expect/stall/reason"),
    ({"expect": {"instances": {"child": {"exist": False}}}}, "expect/instances/child"),
    ({"programs": {"main": {"steps": [{"call_activity": {"input": 1}}]}}}, "programs/main"),  # program schema
    ({"kind": "vector"}, "(top)"),                                                    # vector without `vector`
])
def test_typical_mistakes_are_rejected(change: dict[str, Any], where: str):
    doc = {**BASE, **change}
    if "requirement" in change:
        del doc["requirements"]
    problems = _errors(doc)
    assert problems, f"accepted: {change}"
    assert any(p.startswith(f"{where}:") or p.startswith(f"{where}/") for p in problems), problems
