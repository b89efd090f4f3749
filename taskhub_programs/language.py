"""The program language's model and parser: bundles, programs, steps.

A bundle names programs; a program is a list of steps, optionally in named
versions (v1, v2, ...; one is the default). `load_bundle` validates a whole
bundle and reports every problem at once, each with its path in the document.
Expressions stay as written here; `expressions.py` evaluates them. See
docs/programs.md for the language with examples.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from taskhub_programs.expressions import OPERATORS

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BUILTIN_ACTIVITIES = ("echo", "fail", "sleep", "record", "propagated")
# History propagation scopes as written (`propagation:` on call_activity / call_child).
PROPAGATION_SCOPES = ("none", "own", "lineage")


class ProgramError(ValueError):
    """A bundle that does not follow the language; `problems` lists every one with its path."""

    def __init__(self, problems: Sequence[str], *, source: str = "") -> None:
        self.problems = list(problems)
        where = f" in {source}" if source else ""
        super().__init__(f"{len(self.problems)} problem(s){where}:\n" + "\n".join(f"  - {p}" for p in self.problems))


@dataclass(frozen=True)
class Retry:
    max_attempts: int
    first_delay: float
    backoff: float = 1.0
    max_delay: float | None = None
    # No attempt starts once the delays so far add up to this (seconds from the first attempt); None: no limit.
    timeout: float | None = None


@dataclass(frozen=True)
class CallActivity:
    name: str
    input: Any = None
    retry: Retry | None = None
    as_: str | None = None
    app: str | None = None  # the app whose workers run it (None: the caller's)
    propagation: str | None = None  # "own" / "lineage" (None: no history handed on)


@dataclass(frozen=True)
class CallChild:
    workflow: str
    input: Any = None
    instance_id: Any = None
    retry: Retry | None = None
    as_: str | None = None
    app: str | None = None
    propagation: str | None = None


@dataclass(frozen=True)
class Spawn:
    """A detached workflow started from the workflow's own code: not awaited, never reported back."""

    workflow: str
    input: Any = None
    instance_id: Any = None  # None: the worker's default id, `<instance id>-<n>`
    as_: str | None = None  # the spawned instance's id


@dataclass(frozen=True)
class Timer:
    duration: float
    as_: str | None = None


class _NoDefault:
    """No `default:` given; one object, pickled by name so loaded programs can cross processes."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "_NO_DEFAULT"


_NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class WaitEvent:
    name: str
    timeout: float | None = None  # None: wait forever
    default: Any = _NO_DEFAULT  # value on timeout; without it a timeout fails the workflow
    as_: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


Task = Union[CallActivity, CallChild, Timer, WaitEvent]


@dataclass(frozen=True)
class All:
    tasks: tuple[Task, ...]
    as_: str | None = None


@dataclass(frozen=True)
class AnyOf:
    tasks: tuple[Task, ...]
    as_: str | None = None


@dataclass(frozen=True)
class IfPatched:
    patch: str
    then: tuple["Step", ...] = ()
    else_: tuple["Step", ...] = ()


@dataclass(frozen=True)
class If:
    cond: Any
    then: tuple["Step", ...] = ()
    else_: tuple["Step", ...] = ()


@dataclass(frozen=True)
class SetVar:
    var: str
    value: Any


@dataclass(frozen=True)
class SetStatus:
    value: Any


@dataclass(frozen=True)
class ContinueAsNew:
    input: Any = None
    carry_events: bool = False


@dataclass(frozen=True)
class Return:
    value: Any = None


@dataclass(frozen=True)
class Fail:
    message: Any
    type: str = "ProgramFailure"


Step = Union[CallActivity, CallChild, Spawn, Timer, WaitEvent, All, AnyOf, IfPatched, If, SetVar, SetStatus,
             ContinueAsNew, Return, Fail]
# Each step kind's key as written (and its `step` in the canonical form).
STEP_NAMES: dict[type, str] = {
    CallActivity: "call_activity", CallChild: "call_child", Spawn: "spawn", Timer: "timer", WaitEvent: "wait_event",
    All: "all", AnyOf: "any", IfPatched: "if_patched", If: "if", SetVar: "set", SetStatus: "set_status",
    ContinueAsNew: "continue_as_new", Return: "return", Fail: "fail"}


def walk_steps(steps: Sequence["Step"], path: str) -> Iterator[tuple[str, "Step"]]:
    """(path, step) for every step, nested ones included (an all's or any's tasks, an if's branches), in
    program order; `path` is the JSONPath of `steps` (e.g. "$.programs.main.steps")."""
    for i, step in enumerate(steps):
        here = f"{path}[{i}].{STEP_NAMES.get(type(step), type(step).__name__)}"
        yield here, step
        if isinstance(step, (All, AnyOf)):
            yield from walk_steps(step.tasks, here)
        if isinstance(step, (If, IfPatched)):
            yield from walk_steps(step.then, f"{here}.then")
            yield from walk_steps(step.else_, f"{here}.else")


@dataclass(frozen=True)
class Program:
    name: str
    version: str | None
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class ProgramFamily:
    """All versions of one workflow name; `default` is the version new instances get."""

    name: str
    versions: Mapping[str, Program]
    default: str | None  # None: unversioned (one Program under key "")

    @property
    def versioned(self) -> bool:
        return self.default is not None

    def resolve(self, pinned: str | None) -> Program | None:
        """The program for a pinned version name (None: the default); None if this worker lacks it."""
        if not self.versioned:
            return self.versions[""]
        return self.versions.get(pinned if pinned else self.default)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Bundle:
    programs: Mapping[str, ProgramFamily] = field(default_factory=dict)

    def family(self, name: str) -> ProgramFamily | None:
        return self.programs.get(name)

    def restricted(self, *, versions: Mapping[str, Sequence[str]]) -> "Bundle":
        """A copy that keeps only the given versions of some workflows (a 'deployment' without them)."""
        out = dict(self.programs)
        for name, keep in versions.items():
            fam = out[name]
            kept = {v: p for v, p in fam.versions.items() if v in keep}
            if not kept:  # no version left: this worker does not know the workflow at all
                del out[name]
                continue
            default = fam.default if fam.default in kept else (sorted(kept)[-1] if kept else None)
            out[name] = ProgramFamily(name=name, versions=kept, default=default)
        return Bundle(programs=out)


# ---------------------------------------------------------------------------- parsing


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like '500ms', '2s', '1m', '1h', '1d'."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"duration {value!r} is negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2)]
    raise ValueError(f"{value!r} is not a duration (use seconds or a string like '500ms', '2s', '1m', '1h', '1d')")


class _Parser:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def err(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def bundle(self, doc: Any) -> Bundle:
        if not isinstance(doc, Mapping) or "programs" not in doc:
            self.err("$", "a program bundle is a mapping with a 'programs' key")
            return Bundle()
        extra = set(doc) - {"programs", "$schema"}
        if extra:
            self.err("$", f"unknown keys {sorted(extra)}; allowed: programs")
        progs = doc["programs"]
        if not isinstance(progs, Mapping) or not progs:
            self.err("$.programs", "must be a non-empty mapping of workflow name to program")
            return Bundle()
        out: dict[str, ProgramFamily] = {}
        for name, body in progs.items():
            fam = self.family(str(name), body, f"$.programs.{name}")
            if fam is not None:
                out[str(name)] = fam
        return Bundle(programs=out)

    def family(self, name: str, body: Any, path: str) -> ProgramFamily | None:
        if not isinstance(body, Mapping):
            self.err(path, "must be a mapping with 'steps' or 'versions'")
            return None
        if "versions" in body:
            extra = set(body) - {"versions", "default"}
            if extra:
                self.err(path, f"unknown keys {sorted(extra)}; a versioned program has 'versions' and 'default'")
            versions = body["versions"]
            if not isinstance(versions, Mapping) or not versions:
                self.err(f"{path}.versions", "must be a non-empty mapping of version name to {steps: [...]}")
                return None
            default = body.get("default")
            if default is None:
                default = sorted(str(v) for v in versions)[-1]
            elif str(default) not in {str(v) for v in versions}:
                self.err(f"{path}.default", f"names version {default!r}, which is not one of {sorted(map(str, versions))}")
            progs: dict[str, Program] = {}
            for vname, vbody in versions.items():
                vpath = f"{path}.versions.{vname}"
                if not isinstance(vbody, Mapping) or set(vbody) != {"steps"}:
                    self.err(vpath, "must be a mapping with exactly one key, 'steps'")
                    continue
                progs[str(vname)] = Program(name=name, version=str(vname), steps=self.steps(vbody["steps"], f"{vpath}.steps"))
            return ProgramFamily(name=name, versions=progs, default=str(default))
        if set(body) != {"steps"}:
            self.err(path, f"unknown keys {sorted(set(body) - {'steps'})}; a program has 'steps' (or 'versions')")
        return ProgramFamily(name=name, versions={"": Program(name=name, version=None,
                                                               steps=self.steps(body.get("steps"), f"{path}.steps"))},
                             default=None)

    def steps(self, raw: Any, path: str) -> tuple[Step, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.err(path, "must be a list of steps")
            return ()
        out = []
        for i, item in enumerate(raw):
            step = self.step(item, f"{path}[{i}]")
            if step is not None:
                out.append(step)
        return tuple(out)

    def _kind(self, item: Any, path: str, allowed: Sequence[str]) -> tuple[str, Any, str | None] | None:
        if not isinstance(item, Mapping):
            self.err(path, f"a step is a mapping with one of {list(allowed)}")
            return None
        keys = [k for k in item if k != "as"]
        if len(keys) != 1 or keys[0] not in allowed:
            self.err(path, f"a step has exactly one of {list(allowed)} (plus optional 'as'); got {sorted(map(str, item))}")
            return None
        as_ = item.get("as")
        if as_ is not None and (not isinstance(as_, str) or not _VAR.match(as_)):
            self.err(f"{path}.as", f"{as_!r} is not a variable name (letters, digits, '_')")
            as_ = None
        return keys[0], item[keys[0]], as_

    def step(self, item: Any, path: str) -> Step | None:
        parsed = self._kind(item, path, _STEP_KINDS)
        if parsed is None:
            return None
        kind, body, as_ = parsed
        p = f"{path}.{kind}"
        if kind in _TASK_KINDS:
            return self.task(kind, body, p, as_)
        if kind == "spawn":
            body = self.mapping(body, p, required=("workflow",), optional=("input", "instance_id"))
            if body is None:
                return None
            self.expr(body.get("input"), f"{p}.input")
            self.expr(body.get("instance_id"), f"{p}.instance_id")
            return Spawn(workflow=str(body["workflow"]), input=body.get("input"), instance_id=body.get("instance_id"),
                         as_=as_)
        if as_ is not None and kind not in ("all", "any"):
            self.err(f"{path}.as", f"'{kind}' produces no value to store")
        if kind in ("all", "any"):
            if not isinstance(body, list) or not body:
                self.err(p, "must be a non-empty list of tasks (call_activity, call_child, timer, wait_event)")
                return None
            tasks = []
            for i, t in enumerate(body):
                tp = self._kind(t, f"{p}[{i}]", _TASK_KINDS)
                if tp is None:
                    continue
                if tp[2] is not None:
                    self.err(f"{p}[{i}].as", "tasks inside all/any have no 'as'; name the all/any step instead")
                task = self.task(tp[0], tp[1], f"{p}[{i}].{tp[0]}", None)
                if task is not None:
                    tasks.append(task)
            return (All if kind == "all" else AnyOf)(tasks=tuple(tasks), as_=as_)
        if kind == "if_patched":
            body = self.mapping(body, p, required=("patch",), optional=("then", "else"))
            if body is None:
                return None
            return IfPatched(patch=str(body["patch"]), then=self.steps(body.get("then"), f"{p}.then"),
                             else_=self.steps(body.get("else"), f"{p}.else"))
        if kind == "if":
            body = self.mapping(body, p, required=("cond",), optional=("then", "else"))
            if body is None:
                return None
            self.expr(body["cond"], f"{p}.cond")
            return If(cond=body["cond"], then=self.steps(body.get("then"), f"{p}.then"),
                      else_=self.steps(body.get("else"), f"{p}.else"))
        if kind == "set":
            body = self.mapping(body, p, required=("var", "value"))
            if body is None:
                return None
            if not isinstance(body["var"], str) or not _VAR.match(body["var"]):
                self.err(f"{p}.var", f"{body['var']!r} is not a variable name")
            self.expr(body["value"], f"{p}.value")
            return SetVar(var=str(body["var"]), value=body["value"])
        if kind == "set_status":
            self.expr(body, p)
            return SetStatus(value=body)
        if kind == "continue_as_new":
            body = self.mapping(body if body is not None else {}, p, optional=("input", "carry_events"))
            if body is None:
                return None
            carry = body.get("carry_events", False)
            if not isinstance(carry, bool):
                self.err(f"{p}.carry_events", "must be true or false")
            self.expr(body.get("input"), f"{p}.input")
            return ContinueAsNew(input=body.get("input"), carry_events=bool(carry))
        if kind == "return":
            self.expr(body, p)
            return Return(value=body)
        if kind == "fail":
            if isinstance(body, str):
                return Fail(message=body)
            body = self.mapping(body, p, required=("message",), optional=("type",))
            if body is None:
                return None
            self.expr(body["message"], f"{p}.message")
            return Fail(message=body["message"], type=str(body.get("type", "ProgramFailure")))
        raise AssertionError(kind)

    def task(self, kind: str, body: Any, path: str, as_: str | None) -> Task | None:
        if kind == "call_activity":
            body = self.mapping(body, path, required=("name",), optional=("input", "retry", "app", "propagation"))
            if body is None:
                return None
            self.expr(body.get("input"), f"{path}.input")
            return CallActivity(name=str(body["name"]), input=body.get("input"),
                                retry=self.retry(body.get("retry"), f"{path}.retry"), as_=as_,
                                app=self.app_id(body.get("app"), f"{path}.app"),
                                propagation=self.scope(body.get("propagation"), f"{path}.propagation"))
        if kind == "call_child":
            body = self.mapping(body, path, required=("workflow",),
                                optional=("input", "instance_id", "retry", "app", "propagation"))
            if body is None:
                return None
            self.expr(body.get("input"), f"{path}.input")
            self.expr(body.get("instance_id"), f"{path}.instance_id")
            return CallChild(workflow=str(body["workflow"]), input=body.get("input"),
                             instance_id=body.get("instance_id"),
                             retry=self.retry(body.get("retry"), f"{path}.retry"), as_=as_,
                             app=self.app_id(body.get("app"), f"{path}.app"),
                             propagation=self.scope(body.get("propagation"), f"{path}.propagation"))
        if kind == "timer":
            if not isinstance(body, Mapping):
                body = {"duration": body}
            body = self.mapping(body, path, required=("duration",))
            if body is None:
                return None
            return Timer(duration=self.duration(body["duration"], f"{path}.duration"), as_=as_)
        if kind == "wait_event":
            if isinstance(body, str):
                body = {"name": body}
            body = self.mapping(body, path, required=("name",), optional=("timeout", "default"))
            if body is None:
                return None
            timeout = body.get("timeout")
            self.expr(body.get("default"), f"{path}.default")
            return WaitEvent(name=str(body["name"]),
                             timeout=None if timeout is None else self.duration(timeout, f"{path}.timeout"),
                             default=body["default"] if "default" in body else _NO_DEFAULT, as_=as_)
        raise AssertionError(kind)

    def app_id(self, raw: Any, path: str) -> str | None:
        if raw is None:
            return None
        if not isinstance(raw, str) or not raw:
            self.err(path, "must be a non-empty app id (a string)")
            return None
        return raw

    def scope(self, raw: Any, path: str) -> str | None:
        if raw is None or raw == "none":
            return None  # "none" is the default: written or not, the call propagates nothing
        if raw not in PROPAGATION_SCOPES:
            self.err(path, f"must be one of {', '.join(PROPAGATION_SCOPES)}, not {raw!r}")
            return None
        return str(raw)

    def retry(self, raw: Any, path: str) -> Retry | None:
        if raw is None:
            return None
        body = self.mapping(raw, path, required=("max_attempts", "first_delay"), optional=("backoff", "max_delay", "timeout"))
        if body is None:
            return None
        attempts = body["max_attempts"]
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            self.err(f"{path}.max_attempts", f"{attempts!r} must be a whole number >= 1")
            attempts = 1
        backoff = body.get("backoff", 1.0)
        if not isinstance(backoff, (int, float)) or isinstance(backoff, bool) or backoff < 1:
            self.err(f"{path}.backoff", f"{backoff!r} must be a number >= 1")
            backoff = 1.0
        max_delay, timeout = body.get("max_delay"), body.get("timeout")
        return Retry(max_attempts=attempts, first_delay=self.duration(body["first_delay"], f"{path}.first_delay"),
                     backoff=float(backoff),
                     max_delay=None if max_delay is None else self.duration(max_delay, f"{path}.max_delay"),
                     timeout=None if timeout is None else self.duration(timeout, f"{path}.timeout"))

    def duration(self, raw: Any, path: str) -> float:
        try:
            return parse_duration(raw)
        except ValueError as exc:
            self.err(path, str(exc))
            return 0.0

    def mapping(self, raw: Any, path: str, *, required: Sequence[str] = (),
                optional: Sequence[str] = ()) -> Mapping[str, Any] | None:
        if not isinstance(raw, Mapping):
            self.err(path, f"must be a mapping with keys {list(required) + list(optional)}")
            return None
        missing = [k for k in required if k not in raw]
        if missing:
            self.err(path, f"missing required key(s) {missing}")
            return None
        extra = set(raw) - set(required) - set(optional)
        if extra:
            self.err(path, f"unknown key(s) {sorted(map(str, extra))}; allowed: {list(required) + list(optional)}")
        return raw

    def expr(self, raw: Any, path: str) -> None:
        if isinstance(raw, Mapping):
            ops = [k for k in raw if isinstance(k, str) and k.startswith("$")]
            if ops:
                if len(raw) != 1 or ops[0] not in OPERATORS:
                    self.err(path, f"an operator is a mapping with one key from {list(OPERATORS)}; got {sorted(raw)}")
                    return
                self.expr(raw[ops[0]], f"{path}.{ops[0]}")
                return
            for k, v in raw.items():
                self.expr(v, f"{path}.{k}")
        elif isinstance(raw, list):
            for i, v in enumerate(raw):
                self.expr(v, f"{path}[{i}]")


_TASK_KINDS = ("call_activity", "call_child", "timer", "wait_event")
_STEP_KINDS = _TASK_KINDS + ("spawn", "all", "any", "if_patched", "if", "set", "set_status", "continue_as_new", "return",
                             "fail")


def parse_bundle(doc: Any, *, source: str = "") -> Bundle:
    parser = _Parser()
    bundle = parser.bundle(doc)
    if parser.problems:
        raise ProgramError(parser.problems, source=source)
    return bundle


def load_bundle(path: Path | str) -> Bundle:
    """Load a bundle from a YAML or JSON file; every problem is reported at once."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProgramError([f"cannot read the program bundle: {exc.strerror}"], source=str(p)) from None
    if p.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProgramError([f"not valid JSON: {exc}"], source=str(p)) from None
        return parse_bundle(doc, source=str(p))
    try:
        # Imported only for YAML: SDK drivers load JSON bundles in virtualenvs without PyYAML.
        import yaml
    except ModuleNotFoundError:
        raise ProgramError(["PyYAML is not installed here; pass the bundle as .json"], source=str(p)) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProgramError([f"not valid YAML: {exc}"], source=str(p)) from None
    return parse_bundle(doc, source=str(p))
