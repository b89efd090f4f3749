"""The canonical program form: what the harness hands every driver (docs/programs.md, "The canonical form").

One shape per step, every default filled in, durations in seconds, expressions as canonical nodes
(expressions.py). `canonical_form` is the one function that makes it, from a scenario's programs
as written; a driver reads it without re-parsing shorthands (`timer: 2s`, `wait_event: name`,
`fail: text`, ...) or knowing the loader's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskhub_programs.expressions import canonical_expr
from taskhub_programs.language import (
    All, AnyOf, Bundle, CallActivity, CallChild, ContinueAsNew, Fail, If, IfPatched, ProgramFamily, Retry, Return,
    SetStatus, SetVar, Spawn, Step, Timer, WaitEvent, parse_bundle,
)

FORMAT = "taskhub-programs/canonical"
VERSION = 1


def canonical_form(programs: Mapping[str, Any], *, source: str = "") -> dict[str, Any]:
    """The canonical form of a bundle's programs as written (`{name: program}`, the value of a
    bundle's `programs` key); a ProgramError lists every problem of a bundle that does not load."""
    return canonical_bundle(parse_bundle({"programs": programs}, source=source))


def canonical_bundle(bundle: Bundle) -> dict[str, Any]:
    """The canonical form of a loaded bundle (JSON-ready: plain dicts, lists and scalars)."""
    return {"format": FORMAT, "version": VERSION,
            "programs": {name: _family(family) for name, family in bundle.programs.items()}}


def _family(family: ProgramFamily) -> dict[str, Any]:
    return {"default": family.default,
            "versions": [{"name": program.version, "steps": _steps(program.steps)}
                         for program in family.versions.values()]}


def _steps(steps: tuple[Step, ...]) -> list[dict[str, Any]]:
    return [_step(s) for s in steps]


def _retry(retry: Retry | None) -> dict[str, Any] | None:
    if retry is None:
        return None
    out = {"max_attempts": retry.max_attempts, "first_delay": float(retry.first_delay),
           "backoff": float(retry.backoff),
           "max_delay": None if retry.max_delay is None else float(retry.max_delay)}
    if retry.timeout is not None:  # only where set: a policy without one keeps the form it had before it
        out["timeout"] = float(retry.timeout)
    return out


def _routing(step: CallActivity | CallChild) -> dict[str, Any]:
    """`app` and `propagation` only where set: a one-app program's form is what it was before them."""
    out: dict[str, Any] = {}
    if step.app is not None:
        out["app"] = step.app
    if step.propagation is not None:
        out["propagation"] = step.propagation
    return out


def _step(step: Step) -> dict[str, Any]:
    if isinstance(step, CallActivity):
        return {"step": "call_activity", "name": step.name, "input": canonical_expr(step.input),
                "retry": _retry(step.retry), "as": step.as_, **_routing(step)}
    if isinstance(step, CallChild):
        return {"step": "call_child", "workflow": step.workflow, "input": canonical_expr(step.input),
                "instance_id": None if step.instance_id is None else canonical_expr(step.instance_id),
                "retry": _retry(step.retry), "as": step.as_, **_routing(step)}
    if isinstance(step, Spawn):
        return {"step": "spawn", "workflow": step.workflow, "input": canonical_expr(step.input),
                "instance_id": None if step.instance_id is None else canonical_expr(step.instance_id), "as": step.as_}
    if isinstance(step, Timer):
        return {"step": "timer", "duration": float(step.duration), "as": step.as_}
    if isinstance(step, WaitEvent):
        return {"step": "wait_event", "name": step.name,
                "timeout": None if step.timeout is None else float(step.timeout),
                "default": canonical_expr(step.default) if step.has_default else None, "as": step.as_}
    if isinstance(step, (All, AnyOf)):
        return {"step": "all" if isinstance(step, All) else "any", "tasks": [_step(t) for t in step.tasks],
                "as": step.as_}
    if isinstance(step, IfPatched):
        return {"step": "if_patched", "patch": step.patch, "then": _steps(step.then), "else": _steps(step.else_)}
    if isinstance(step, If):
        return {"step": "if", "cond": canonical_expr(step.cond), "then": _steps(step.then),
                "else": _steps(step.else_)}
    if isinstance(step, SetVar):
        return {"step": "set", "var": step.var, "value": canonical_expr(step.value)}
    if isinstance(step, SetStatus):
        return {"step": "set_status", "value": canonical_expr(step.value)}
    if isinstance(step, ContinueAsNew):
        return {"step": "continue_as_new", "input": canonical_expr(step.input), "carry_events": step.carry_events}
    if isinstance(step, Return):
        return {"step": "return", "value": canonical_expr(step.value)}
    if isinstance(step, Fail):
        return {"step": "fail", "message": canonical_expr(step.message), "type": step.type}
    raise AssertionError(f"a step kind canonical.py does not know: {type(step).__name__}")
