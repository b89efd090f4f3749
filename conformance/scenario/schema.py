"""The editors' JSON schema of scenario files: its step definitions are generated from the step registry.

`scenario.schema.json` beside this module is checked in (editors read it by path). Its step
definitions (`$defs`: step, start_args, start_spec, worker_args) and the enums the loader owns
(status, grpc_code) are generated here from conformance/scenario/steps.py and the loader; the rest
(expectations, vectors, fault rules, ...) is written by hand in the file. A test checks that the
file equals `generate(file)`; after changing a step kind, regenerate it:

    python -m conformance.scenario.schema
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.scenario.basics import STATUSES
from conformance.scenario.steps import STEPS, StepKind, args_of, schema_of

SCHEMA_PATH = Path(__file__).with_name("scenario.schema.json")
GENERATED_DEFS = ("status", "grpc_code", "start_args", "start_spec", "worker_args", "step")
_NO_ARGS = {"oneOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]}


def _mapping_form(kind: StepKind) -> dict[str, Any]:
    """The schema of a kind's arguments written as a mapping."""
    properties: dict[str, Any] = {}
    for _, a in args_of(kind.args):
        properties[a.key] = {**schema_of(a.value), **({"description": a.doc} if a.doc else {})}
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    required = [a.key for _, a in args_of(kind.args) if a.missing is not None]
    if required:
        out["required"] = required
    return out


def _arguments(kind: StepKind) -> dict[str, Any]:
    """Every way a kind's arguments may be written: a mapping; a bare value (scalar kinds); nothing (no required one)."""
    if not args_of(kind.args):
        return dict(_NO_ARGS)
    form = _mapping_form(kind)
    if kind.scalar is not None:
        bare = next(schema_of(a.value) for _, a in args_of(kind.args) if a.key == kind.scalar)
        return {"oneOf": [bare, form]}
    if "required" not in form:  # `- restart_worker:` with nothing after it
        return {"oneOf": [{"type": "null"}, form]}
    return form


def step_defs() -> dict[str, Any]:
    """The `$defs` entries of steps: one per shared argument form, and `step` itself."""
    defs: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    for kind in STEPS.values():
        if kind.shared is not None:
            defs.setdefault(kind.shared, _arguments(kind))
            properties[kind.name] = {"$ref": f"#/$defs/{kind.shared}", "description": kind.doc}
        else:
            properties[kind.name] = {"description": kind.doc, **_arguments(kind)}
    start = defs["start_args"]
    defs["start_spec"] = {**start, "properties": {**start["properties"], "expect_error": {"$ref": "#/$defs/expect_error"}}}
    properties["expect_error"] = {"$ref": "#/$defs/expect_error"}
    defs["step"] = {
        "description": "A mapping with exactly one step key, plus optional expect_error.",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "oneOf": [{"required": [name]} for name in STEPS],
    }
    return defs


def generate(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with its generated definitions replaced by what the registry and the loader say now."""
    from conformance.scenario.loader import GRPC_CODES

    fresh = {**step_defs(), "status": {"enum": list(STATUSES)}, "grpc_code": {"enum": list(GRPC_CODES)}}
    defs = dict(schema.get("$defs", {}))
    for name in GENERATED_DEFS:  # in place: the file keeps its order
        defs[name] = fresh[name]
    return {**schema, "$defs": defs}


def render(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    current = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    text = render(generate(current))
    if text == SCHEMA_PATH.read_text(encoding="utf-8"):
        print(f"{SCHEMA_PATH.name} is up to date")
        return 0
    SCHEMA_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
