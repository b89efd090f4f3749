"""Load and validate scenario files; every problem is reported at once with `file:line` and an excerpt."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from taskhub_programs import ProgramError, parse_bundle, parse_duration

from conformance.errors import InputError, Problem
from conformance.scenario.engine import parse_engine
from conformance.scenario.basics import MISSING, STATUSES, ErrorExpect, InstanceStatus, StartSpec
from conformance.scenario.model import (
    DIRECTIONS, AccessRule, AppSpec, AppWorker, Compare, Expectation, HistoryExpect, LedgerExpect, Reach, Scenario,
    ScenarioKind, Vector,
)
from conformance.scenario.matching import event_kind_problem, event_pattern_problem
from conformance.scenario.placeholders import has_placeholder
from conformance.scenario.source import SourceDoc, did_you_mean, load_source
from conformance.scenario.steps import STEPS, OnInstance, Start, Step, WorkerArgs, read_args
from conformance.scenario.wire import WireError, parse_event
from conformance.verdict import Subject

TOP_KEYS = {"id", "title", "kind", "requirements", "applies_to", "requires", "programs", "sidecar", "engine", "worker",
            "start", "steps", "faults", "expect", "ledger", "checks", "charges", "timeout", "vector", "apps", "$schema"}
APP_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
_WORKER_KINDS = tuple(k.name for k in STEPS.values() if issubclass(k.args, WorkerArgs))  # steps that bring programs
SIDECAR_OPTIONS = {"max_payload", "activity_lease", "clock", "api_token", "task_execution_id"}
GRPC_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
              "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
              "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
STALL_REASONS = ("PATCH_MISMATCH", "VERSION_NOT_AVAILABLE", "PAYLOAD_SIZE_EXCEEDED")


def _bad_scenarios(problems: Sequence[Problem]) -> InputError:
    """Bad scenario input: every problem, each with `file:line` and the YAML excerpt."""
    return InputError(problems, subject="scenario files")


class _Checker:
    def __init__(self, doc: SourceDoc) -> None:
        self.doc = doc
        self.problems: list[Problem] = []

    def err(self, path: tuple[Any, ...], message: str) -> None:
        span = self.doc.span(path)
        self.problems.append(Problem(file=span.file, line=span.line, what=message, excerpt=self.doc.excerpt(span)))

    def get(self, data: Mapping[str, Any], key: str, path: tuple[Any, ...], kind: type | tuple[type, ...],
            default: Any = MISSING, *, what: str = "") -> Any:
        if key not in data:
            if default is MISSING:
                self.err(path, f"missing required key '{key}'{what}")
            return default
        value = data[key]
        if not isinstance(value, kind) or isinstance(value, bool) and bool not in _tuple(kind):
            names = " or ".join(k.__name__ for k in _tuple(kind))
            self.err(path + (key,), f"'{key}' must be a {names}, not {type(value).__name__}")
            return default if default is not MISSING else None
        return value

    def keys(self, data: Mapping[str, Any], allowed: Iterable[str], path: tuple[Any, ...], what: str) -> None:
        allowed = sorted(allowed)
        for k in data:
            if k not in allowed:
                self.err(path + (k,), f"unknown key {k!r} in {what}{did_you_mean(k, allowed)}; "
                                      f"allowed: {', '.join(allowed) or 'none'}")

    def duration(self, value: Any, path: tuple[Any, ...]) -> float:
        return _duration(self, value, path)

    def programs(self, raw: Any, path: tuple[Any, ...]) -> None:
        _programs(self, raw, path)


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _duration(c: _Checker, value: Any, path: tuple[Any, ...]) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        c.err(path, str(exc))
        return 0.0
    if not math.isfinite(seconds):  # .inf or .nan would wait forever
        c.err(path, f"duration {value!r} is not a finite number of seconds")
        return 0.0
    return seconds


def _error_expect(c: _Checker, raw: Any, path: tuple[Any, ...]) -> ErrorExpect | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"code": raw}
    if not isinstance(raw, Mapping):
        c.err(path, "expect_error is a gRPC code name or {code: NAME | [NAMES], details: regex}")
        return None
    c.keys(raw, {"code", "details"}, path, "expect_error")
    codes = raw.get("code", [])
    codes = [codes] if isinstance(codes, str) else codes
    for code in codes:
        if code not in GRPC_CODES:
            c.err(path + ("code",), f"{code!r} is not a gRPC status code{did_you_mean(code, GRPC_CODES)}; "
                                      f"known: {', '.join(GRPC_CODES)}")
    details = raw.get("details")
    if details is not None:
        try:
            re.compile(str(details))
        except re.error as exc:
            c.err(path + ("details",), f"not a valid regex: {exc}")
    return ErrorExpect(codes=tuple(codes), details=None if details is None else str(details))


def _programs(c: _Checker, raw: Any, path: tuple[Any, ...]) -> Any:
    try:
        return parse_bundle({"programs": raw}, source=c.doc.file)
    except ProgramError as exc:
        for problem in exc.problems:
            where, _, message = problem.partition(": ")
            p = path + _program_path(where)
            keys = _unknown_program_keys(message)
            if keys is None:
                c.err(p, f"program: {message}")
            for key, allowed in keys or ():
                # On the key's own line, with the closest allowed name.
                c.err(p + (key,), f"program: unknown key {key!r}{did_you_mean(key, allowed)}; "
                                  f"allowed: {', '.join(allowed)}")
        return None


_PROGRAM_KEYS = (
    # The program language's messages about keys it does not know (taskhub_programs/language.py), and
    # what is allowed where each is said.
    (re.compile(r"unknown key\(s\) (\[.*\]); allowed: (\[.*\])$"), None),
    (re.compile(r"unknown keys (\[.*\]); a versioned program has 'versions' and 'default'$"), ["versions", "default"]),
    (re.compile(r"unknown keys (\[.*\]); a program has 'steps' \(or 'versions'\)$"), ["steps", "versions"]),
    (re.compile(r"a step has exactly one of (\[.*\]) \(plus optional 'as'\); got (\[.*\])$"), "step"),
)


def _unknown_program_keys(message: str) -> list[tuple[str, list[str]]] | None:
    """[(unknown key, allowed keys)] when `message` is about unknown keys; None otherwise."""
    import ast

    for regex, allowed in _PROGRAM_KEYS:
        m = regex.match(message)
        if m is None:
            continue
        try:
            first, *rest = (ast.literal_eval(g) for g in m.groups())
        except (ValueError, SyntaxError):
            return None
        if allowed == "step":  # `first` lists the step kinds, `rest[0]` the keys the step has
            kinds = [str(k) for k in first]
            unknown = [str(k) for k in rest[0] if k not in kinds and k != "as"]
            return [(k, kinds + ["as"]) for k in unknown] if unknown and len(rest[0]) - len(unknown) <= 1 else None
        keys = [str(k) for k in first]
        return [(k, [str(a) for a in (rest[0] if allowed is None else allowed)]) for k in keys] or None
    return None


def _program_path(where: str) -> tuple[Any, ...]:
    """'$.programs.main.steps[0].call_activity' -> ('main', 'steps', 0, 'call_activity')."""
    parts: list[Any] = []
    for token in re.findall(r"\.([^.\[]+)|\[(\d+)\]", where.removeprefix("$.programs")):
        name, index = token
        parts.append(int(index) if index else name)
    return tuple(parts)


def _expectation(c: _Checker, raw: Any, path: tuple[Any, ...]) -> Expectation | None:
    if not isinstance(raw, Mapping):
        c.err(path, "an expectation is a mapping (status, output, custom_status, failure, stall, history, exists)")
        return None
    c.keys(raw, {"status", "output", "custom_status", "failure", "stall", "history", "exists"}, path, "expect")
    status = raw.get("status")
    if status is not None and status not in STATUSES:
        c.err(path + ("status",), f"{status!r} is not a status{did_you_mean(status, STATUSES)}; "
                                   f"known: {', '.join(STATUSES)}")
    failure = raw.get("failure") or {}
    if not isinstance(failure, Mapping):
        c.err(path + ("failure",), "failure is {type: ErrorType, message: regex}")
        failure = {}
    c.keys(failure, {"type", "message"}, path + ("failure",), "failure")
    stall = raw.get("stall") or {}
    if not isinstance(stall, Mapping):
        c.err(path + ("stall",), "stall is {reason: PATCH_MISMATCH|..., description: regex}")
        stall = {}
    c.keys(stall, {"reason", "description"}, path + ("stall",), "stall")
    if stall.get("reason") is not None and stall["reason"] not in STALL_REASONS:
        c.err(path + ("stall", "reason"), f"{stall['reason']!r}{did_you_mean(stall['reason'], STALL_REASONS)}; "
                                                  f"known: {', '.join(STALL_REASONS)}")
    history = None
    if "history" in raw:
        h = raw["history"]
        hp = path + ("history",)
        if not isinstance(h, Mapping):
            c.err(hp, "history is {contains_in_order: [...], exactly: [...], not_contains: [...], count: {Kind: n}}")
        else:
            c.keys(h, {"contains_in_order", "exactly", "not_contains", "count"}, hp, "history")
            for key in ("contains_in_order", "exactly", "not_contains"):
                if key in h and not isinstance(h[key], list):
                    c.err(hp + (key,), f"{key} must be a list of event patterns")
                    continue
                for i, pattern in enumerate(h.get(key) or ()):
                    why = event_pattern_problem(pattern) if key != "not_contains" else event_kind_problem(pattern)
                    if why is not None:
                        c.err(hp + (key, i), why)
            count = h.get("count", {})
            if not isinstance(count, Mapping) or not all(isinstance(v, int) for v in count.values()):
                c.err(hp + ("count",), "count maps an event kind to a number")
                count = {}
            for kind in count:
                why = event_kind_problem(kind)
                if why is not None:
                    c.err(hp + ("count", kind), why)
            history = HistoryExpect(
                contains_in_order=tuple(h["contains_in_order"]) if isinstance(h.get("contains_in_order"), list) else None,
                exactly=tuple(h["exactly"]) if isinstance(h.get("exactly"), list) else None,
                not_contains=tuple(h.get("not_contains") or ()), count=dict(count))
    for key, regex in (("message", failure.get("message")), ("description", stall.get("description"))):
        if regex is not None:
            try:
                re.compile(str(regex))
            except re.error as exc:
                c.err(path + (("failure",) if key == "message" else ("stall",)) + (key,), f"not a valid regex: {exc}")
    return Expectation(status=InstanceStatus(status) if status in STATUSES else None, output=raw.get("output", MISSING), custom_status=raw.get("custom_status", MISSING),
                       failure_type=failure.get("type"), failure_message=failure.get("message"),
                       stall_reason=stall.get("reason"), stall_description=stall.get("description"),
                       history=history, exists=raw.get("exists"), span=c.doc.span(path))


def _start(c: _Checker, raw: Any, path: tuple[Any, ...], default_name: str) -> StartSpec | None:
    if not isinstance(raw, Mapping):
        c.err(path, "start is {workflow: NAME, input: ..., as: instance-name, instance_id, scheduled_in, expect_error}")
        return None
    args = read_args(c, STEPS["start"], raw, path, what="start", extra=frozenset({"expect_error"}))
    return args.spec(expect_error=_error_expect(c, raw.get("expect_error"), path + ("expect_error",)),
                     span=c.doc.span(path))


def _step(c: _Checker, raw: Any, path: tuple[Any, ...], names: set[str]) -> Step | None:
    """A step from the registry (conformance/scenario/steps.py): one kind, its typed arguments."""
    if not isinstance(raw, Mapping):
        c.err(path, f"a step is a mapping with one of: {', '.join(sorted(STEPS))}")
        return None
    kinds = [k for k in raw if k != "expect_error"]
    if len(kinds) != 1 or kinds[0] not in STEPS:
        typo = next((did_you_mean(k, STEPS) for k in kinds if k not in STEPS), "")
        c.err(path, f"a step has exactly one of: {', '.join(sorted(STEPS))} (plus optional expect_error); "
                    f"got {', '.join(map(str, raw)) or 'nothing'}{typo}")
        return None
    kind = STEPS[kinds[0]]
    body = raw[kind.name]
    if kind.scalar is not None and not isinstance(body, Mapping):
        body = {kind.scalar: body}
    if body is None:
        body = {}
    sp = path + (kind.name,)
    if not isinstance(body, Mapping):
        c.err(sp, f"'{kind.name}' takes a mapping with keys {sorted(kind.keys) or 'none'}")
        return None
    args = read_args(c, kind, body, sp, what=f"step '{kind.name}'")
    if isinstance(args, Start):
        names.add(args.name)
    if isinstance(args, OnInstance):
        inst = args.instance
        if not inst.startswith("$") and inst not in names and not has_placeholder(inst):
            c.err(sp + ("instance",), f"no instance named {inst!r} was started before this step{did_you_mean(inst, names)}; "
                                      f"known: {', '.join(sorted(names)) or 'none'}")
    return Step(args=args, span=c.doc.span(path),
                expect_error=_error_expect(c, raw.get("expect_error"), path + ("expect_error",)))


def load_scenario(path: Path, *, root: Path) -> Scenario:
    """Load one scenario; raises InputError with every problem found."""
    display = str(path)
    try:
        doc = load_source(path, display=display)  # a file that is not YAML: an InputError of its own
    except OSError as exc:
        raise _bad_scenarios([Problem(file=display, line=1, what=f"cannot read: {exc.strerror}")]) from None
    c = _Checker(doc)
    try:
        return _scenario(c, doc, path=path, root=root)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - a file the checks did not foresee is still bad input, not a crash
        span = doc.span(())
        c.problems.append(Problem(file=span.file, line=span.line, what=f"internal error in the validator on this file "
                                  f"({type(exc).__name__}: {exc}); fix the problems above, or report this file"))
        raise _bad_scenarios(c.problems) from None


def _scenario(c: _Checker, doc: SourceDoc, *, path: Path, root: Path) -> Scenario:
    display = doc.file
    data = doc.data
    if not isinstance(data, Mapping):
        c.err((), "a scenario file is a YAML mapping (id, requirements, programs, start, steps, expect, ...)")
        raise _bad_scenarios(c.problems)
    c.keys(data, TOP_KEYS, (), "a scenario")
    expected_id = path.relative_to(root).with_suffix("").as_posix()
    sid = data.get("id", expected_id)
    if sid != expected_id:
        c.err(("id",), f"id {sid!r} does not match the file's path; it must be {expected_id!r} (the id is the path)")
    kind = data.get("kind", ScenarioKind.FLOW)
    if kind not in tuple(ScenarioKind):
        c.err(("kind",), f"kind {kind!r}; use flow (default) or vector")
    reqs = c.get(data, "requirements", (), list)
    if isinstance(reqs, list) and not reqs:
        c.err(("requirements",), "list at least one requirement id from conformance/requirements.yaml")
    applies = data.get("applies_to", list(DIRECTIONS))
    for i, d in enumerate(applies if isinstance(applies, list) else []):
        if d not in DIRECTIONS:
            c.err(("applies_to", i), f"{d!r} is not a direction{did_you_mean(d, DIRECTIONS)}; "
                                             f"known: {', '.join(DIRECTIONS)}")
    requires = data.get("requires", [])
    if not isinstance(requires, list):
        c.err(("requires",), "requires is a list of capability names")
        requires = []
    programs_raw = c.get(data, "programs", (), dict)
    bundle = _programs(c, programs_raw, ("programs",)) if isinstance(programs_raw, dict) and programs_raw else None
    if isinstance(programs_raw, dict) and not programs_raw:
        c.err(("programs",), "define at least one program")
    sidecar = data.get("sidecar", {}) or {}
    if not isinstance(sidecar, Mapping):
        c.err(("sidecar",), f"sidecar options are a mapping of {sorted(SIDECAR_OPTIONS)}")
        sidecar = {}
    c.keys(sidecar, SIDECAR_OPTIONS, ("sidecar",), "sidecar options")
    if sidecar.get("task_execution_id", "passthrough") not in ("spec", "passthrough"):
        c.err(("sidecar", "task_execution_id"), f"task_execution_id {sidecar['task_execution_id']!r}: use spec (a fresh "
              "id per dispatch) or passthrough (the SDK's id, the default)")
    engine = parse_engine(data.get("engine"), err=c.err, duration=c.duration)
    worker = data.get("worker", {}) or {}
    if not isinstance(worker, Mapping):
        c.err(("worker",), "worker options are a mapping, e.g. {adversary: [...]}")
        worker = {}
    c.keys(worker, {"adversary", "stateful_history", "history_cache_instances"}, ("worker",), "worker options")
    if not isinstance(worker.get("stateful_history", False), bool):
        c.err(("worker", "stateful_history"), "stateful_history is true or false (announce WORKER_CAPABILITY_STATEFUL_HISTORY)")
    cache = worker.get("history_cache_instances")
    if cache is not None and (not isinstance(cache, int) or isinstance(cache, bool) or cache < 0):
        c.err(("worker", "history_cache_instances"), f"history_cache_instances is a count of 0 or more, got {cache!r}")
    if "adversary" in worker:
        from conformance.targets.reference import AdversaryError, parse_rules

        try:
            parse_rules(worker["adversary"], source="worker.adversary")
        except AdversaryError as exc:
            c.err(("worker", "adversary"), str(exc))
    faults: tuple[Any, ...] = ()
    if data.get("faults"):
        from conformance.proxy import parse_rules as parse_faults

        try:
            faults = tuple(parse_faults(data["faults"], source="faults"))
        except InputError as exc:
            for problem in exc.problems:
                c.err(("faults",), problem.what)
    timeout = _duration(c, data.get("timeout", 30), ("timeout",))
    checks = data.get("checks", [])
    if not isinstance(checks, list):
        c.err(("checks",), "checks is a list of check names")
        checks = []
    else:
        from conformance.checks import CHECKS

        for i, name in enumerate(checks):
            if name not in CHECKS:
                c.err(("checks", i), f"unknown check {name!r}{did_you_mean(name, CHECKS)}; "
                                             f"known: {', '.join(sorted(CHECKS))}")
    charges = _charges(c, data.get("charges") or {}, reqs)
    names: set[str] = set()
    starts: list[StartSpec] = []
    steps: list[Step] = []
    vector = None
    expect: dict[str, Expectation] = {}
    ledger = None
    if kind == ScenarioKind.VECTOR:
        vector = _vector(c, data.get("vector"), ("vector",))
    else:
        if "start" in data:
            spec = _start(c, data["start"], ("start",), default_name="main")
            if spec is not None:
                starts.append(spec)
                names.add(spec.name)
        for i, raw in enumerate(data.get("steps") or []):
            step = _step(c, raw, ("steps", i), names)
            if step is not None:
                steps.append(step)
        raw_expect = data.get("expect", {}) or {}
        if not isinstance(raw_expect, Mapping):
            c.err(("expect",), "expect is a mapping")
            raw_expect = {}
        per_instance = {k: v for k, v in raw_expect.items() if k == "instances"}
        main_part = {k: v for k, v in raw_expect.items() if k != "instances"}
        if main_part:
            e = _expectation(c, main_part, ("expect",))
            if e is not None:
                expect["main"] = e
        for name, body in (per_instance.get("instances") or {}).items():
            e = _expectation(c, body, ("expect", "instances", name))
            if e is not None:
                expect[str(name)] = e
        if "ledger" in data:
            ledger = _ledger(c, data["ledger"], ("ledger",))
        if isinstance(programs_raw, dict):
            _program_references(c, data, programs_raw)
    apps = _apps(c, data.get("apps"), programs_raw if isinstance(programs_raw, dict) else {}, kind)
    if c.problems:
        raise _bad_scenarios(c.problems)
    return Scenario(
        id=expected_id, title=str(data.get("title", expected_id)), source=display,
        requirements=tuple(map(str, reqs or ())), applies_to=tuple(applies), requires=tuple(map(str, requires)),
        programs=bundle, programs_doc=dict(programs_raw or {}), kind=ScenarioKind(kind), sidecar=dict(sidecar),
        engine=engine, worker=dict(worker), starts=tuple(starts), steps=tuple(steps), faults=faults, expect=expect, ledger=ledger,
        checks=tuple(checks), charges=charges, timeout=timeout, vector=vector, span=doc.span(()),
        requirements_span=doc.span(("requirements",)), apps=apps)


def _charges(c: _Checker, raw: Any, reqs: Any) -> dict[Subject, str]:
    """`charges: {subject: requirement}`: where this scenario's mismatches of a subject weigh (attribution.py);
    the requirement must be one the scenario lists."""
    if not isinstance(raw, Mapping):
        c.err(("charges",), "charges maps a mismatch subject to a requirement the scenario lists, e.g. "
                            "{custom_status: LIFE-CUSTOM-001}")
        return {}
    out: dict[Subject, str] = {}
    listed = set(map(str, reqs)) if isinstance(reqs, (list, tuple)) else set()  # a bad list is reported already
    for key, rid in raw.items():
        if key not in Subject.__members__.values():
            c.err(("charges", key), f"unknown mismatch subject {key!r}{did_you_mean(str(key), [s.value for s in Subject])}"
                                    f"; known: {', '.join(s.value for s in Subject)}")
        elif str(rid) not in listed:
            c.err(("charges", key), f"charges {key} to {rid!r}, which the scenario's requirements do not list; "
                                    "add it to requirements or name a listed one")
        else:
            out[Subject(key)] = str(rid)
    return out


def _access_policy(c: _Checker, raw: Any, path: tuple[Any, ...]) -> tuple[AccessRule, ...]:
    """`access_policy: [{callers: [app ids], workflows: [name globs], activities: [name globs]}, ...]`."""
    if not isinstance(raw, list):
        c.err(path, "access_policy is a list of rules {callers: [app ids], workflows: [names], activities: [names]} "
                    "(an empty list: a policy that grants nothing)")
        return ()
    rules: list[AccessRule] = []
    for i, rule in enumerate(raw):
        here = path + (i,)
        if not isinstance(rule, Mapping):
            c.err(here, "a rule is {callers: [app ids], workflows: [names], activities: [names]}")
            continue
        c.keys(rule, {"callers", "workflows", "activities"}, here, "an access rule")
        lists = {}
        for key in ("callers", "workflows", "activities"):
            value = rule.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                c.err(here + (key,), f"{key} is a list of non-empty names")
                value = []
            lists[key] = tuple(value)
        if not lists["callers"]:
            c.err(here + ("callers",), "a rule names at least one caller app (daprd skips a rule without callers)")
        rules.append(AccessRule(**lists))
    return tuple(rules)


def _app_policy(c: _Checker, raw: Any, path: tuple[Any, ...]) -> tuple[tuple[AccessRule, ...], tuple[str, ...] | None]:
    """An app's `access_policy`: its rules, or `{scopes: [app ids], rules: [...]}` for a policy resource
    whose `scopes` name the apps that load it (daprd's disk loader skips it elsewhere, R11.11)."""
    if not isinstance(raw, Mapping):
        return _access_policy(c, raw, path), None
    c.keys(raw, {"scopes", "rules"}, path, "an access policy with scopes")
    scopes = raw.get("scopes")
    if not isinstance(scopes, list) or not all(isinstance(a, str) and APP_ID.match(a) for a in scopes):
        c.err(path + ("scopes",), "scopes is a list of app ids (the apps that load this policy; [] for every app)")
        scopes = []
    return _access_policy(c, raw.get("rules", []), path + ("rules",)), tuple(scopes)


def _apps(c: _Checker, raw: Any, programs: Mapping[str, Any], kind: str) -> tuple[AppSpec, ...]:
    """`apps: {<id>: {programs: [...], worker: target|reference}, ...}`: several apps, the first the default."""
    if raw is None:
        return ()
    path: tuple[Any, ...] = ("apps",)
    if kind != "flow":
        c.err(path, "apps are for flow scenarios (a vector is one turn of one worker)")
        return ()
    if not isinstance(raw, Mapping) or len(raw) < 2:
        c.err(path, "apps is a mapping of at least two app ids to {programs: [names], worker: target|reference}")
        return ()
    out: list[AppSpec] = []
    hosted: dict[str, str] = {}
    for name, body in raw.items():
        here = path + (name,)
        if not isinstance(name, str) or not APP_ID.match(name):
            c.err(here, f"app id {name!r}: lowercase letters, digits and '-', as a Dapr app id")
            continue
        if not isinstance(body, Mapping):
            c.err(here, "an app is a mapping {programs: [names], worker: target|reference}")
            continue
        c.keys(body, {"programs", "worker", "access_policy", "namespace", "max_body_size"}, here, "an app")
        names = body.get("programs", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            c.err(here + ("programs",), "programs is a list of program names of this scenario")
            names = []
        for i, prog in enumerate(names):
            if prog not in programs:
                c.err(here + ("programs", i), f"no program {prog!r} in this scenario's programs"
                      + did_you_mean(prog, list(programs)))
            elif prog in hosted:
                c.err(here + ("programs", i), f"program {prog!r} is already hosted by app {hosted[prog]!r}: "
                      "one app per workflow, as a call names the app, not the workflow")
            else:
                hosted[prog] = name
        worker = body.get("worker", "target")
        kinds = {w.value: w for w in AppWorker}
        if worker not in kinds:
            c.err(here + ("worker",), f"worker {worker!r}: target (the worker under test) or reference")
            worker = "target"
        policy, scopes = _app_policy(c, body["access_policy"], here + ("access_policy",)) \
            if "access_policy" in body else (None, None)
        namespace = body.get("namespace")
        if namespace is not None and not (isinstance(namespace, str) and APP_ID.match(namespace)):
            c.err(here + ("namespace",), f"namespace {namespace!r}: lowercase letters, digits and '-', as a "
                                         "Kubernetes namespace")
            namespace = None
        limit = body.get("max_body_size")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            c.err(here + ("max_body_size",), f"max_body_size is a number of bytes of at least 1, got {limit!r}")
            limit = None
        out.append(AppSpec(name=name, programs=tuple(names), worker=kinds[worker], span=c.doc.span(here),
                           access_policy=policy, policy_scopes=scopes, namespace=namespace, max_body_size=limit))
    if out and not any(a.worker is AppWorker.TARGET for a in out):
        c.err(path, "at least one app runs the worker under test (worker: target)")
    return tuple(out)


def _program_references(c: _Checker, data: Mapping[str, Any], programs: Mapping[str, Any]) -> None:
    """Every workflow a scenario starts, calls as a child or restricts to versions is defined.

    The worker would only find out at run time (OrchestratorNotRegisteredError, or a stuck
    child); a start marked `unregistered: true` names a workflow no worker has, on purpose.
    A restarted worker's programs are laid over the scenario's (as the runner does).
    """
    docs: list[tuple[tuple[Any, ...], Mapping[str, Any]]] = [(("programs",), programs)]  # in step order
    steps = data.get("steps") if isinstance(data.get("steps"), list) else []
    for i, raw in enumerate(steps):
        for kind in _WORKER_KINDS:
            args = raw.get(kind) if isinstance(raw, Mapping) else None
            if isinstance(args, Mapping) and isinstance(args.get("programs"), Mapping):
                docs.append((("steps", i, kind, "programs"), args["programs"]))
    defined = sorted({name for _, doc in docs for name in doc})

    def check(name: Any, path: tuple[Any, ...], what: str) -> None:
        if isinstance(name, str) and name not in defined:
            c.err(path, f"{what} {name!r} is not defined in programs{did_you_mean(name, defined)}; "
                        f"defined: {', '.join(defined) or 'none'}")

    starts = [(("start",), data.get("start"))] + [
        (("steps", i, "start"), raw.get("start")) for i, raw in enumerate(steps) if isinstance(raw, Mapping)]
    for path, start in starts:
        if isinstance(start, Mapping) and start.get("unregistered") is not True:
            check(start.get("workflow"), path + ("workflow",), "start of workflow")
        if isinstance(start, Mapping) and not isinstance(start.get("unregistered", False), bool):
            c.err(path + ("unregistered",), "unregistered is true (the workflow is deliberately defined nowhere) "
                                            "or false")
    for base, doc in docs:
        for path, child in _children(doc, base):
            check(child, path, "child workflow")
    for i, raw in enumerate(steps):
        for kind in _WORKER_KINDS:
            args = raw.get(kind) if isinstance(raw, Mapping) else None
            if not isinstance(args, Mapping) or "versions" not in args:
                continue
            vpath = ("steps", i, kind, "versions")
            versions = args["versions"]
            if not isinstance(versions, Mapping):
                c.err(vpath, "versions maps a workflow name to the list of its versions this worker keeps")
                continue
            for name, keep in versions.items():
                check(name, vpath + (name,), "workflow")
                # The programs in effect at this step: the latest replacement up to it (its own included).
                family = next((doc[name] for base, doc in reversed(docs)
                               if name in doc and (len(base) == 1 or base[1] <= i)), None)
                if not isinstance(family, Mapping):
                    continue
                known = family.get("versions")
                if not isinstance(known, Mapping):
                    c.err(vpath + (name,), f"workflow {name!r} has no versions to keep (it is not versioned)")
                    continue
                if not isinstance(keep, list) or not all(isinstance(v, str) for v in keep):
                    c.err(vpath + (name,), "the versions kept are a list of version names, e.g. [v2]")
                    continue
                for v in keep:
                    if v not in known:
                        c.err(vpath + (name,), f"workflow {name!r} has no version {v!r}{did_you_mean(v, known)}; "
                                               f"versions: {', '.join(map(str, known))}")


def _children(programs: Mapping[str, Any], base: tuple[Any, ...]) -> Iterable[tuple[tuple[Any, ...], Any]]:
    """(path, workflow name) of every call_child in a programs document, through all/any/if branches."""
    def steps(raw: Any, path: tuple[Any, ...]) -> Iterable[tuple[tuple[Any, ...], Any]]:
        for i, step in enumerate(raw if isinstance(raw, list) else []):
            if not isinstance(step, Mapping):
                continue
            for kind, body in step.items():
                p = path + (i, kind)
                if kind == "call_child" and isinstance(body, Mapping) and "workflow" in body:
                    yield p + ("workflow",), body["workflow"]
                elif kind in ("all", "any"):
                    yield from steps(body, p)
                elif kind in ("if", "if_patched") and isinstance(body, Mapping):
                    for branch in ("then", "else"):
                        yield from steps(body.get(branch), p + (branch,))

    for name, family in programs.items():
        if not isinstance(family, Mapping):
            continue
        if isinstance(family.get("versions"), Mapping):
            for vname, version in family["versions"].items():
                if isinstance(version, Mapping):
                    yield from steps(version.get("steps"), base + (name, "versions", vname, "steps"))
        else:
            yield from steps(family.get("steps"), base + (name, "steps"))


def _ledger(c: _Checker, raw: Any, path: tuple[Any, ...]) -> LedgerExpect | None:
    if not isinstance(raw, Mapping):
        c.err(path, "ledger is {ok: n, lost: n, duplicated: n, unexpected: n, executions: n}")
        return None
    c.keys(raw, {"ok", "lost", "duplicated", "unexpected", "executions"}, path, "ledger")
    for k, v in raw.items():
        if not isinstance(v, int) or isinstance(v, bool):
            c.err(path + (k,), f"{k} must be a whole number")
    return LedgerExpect(ok=raw.get("ok"), lost=raw.get("lost", 0), duplicated=raw.get("duplicated"),
                        unexpected=raw.get("unexpected", 0), executions=raw.get("executions"))


def _vector(c: _Checker, raw: Any, path: tuple[Any, ...]) -> Vector | None:
    if not isinstance(raw, Mapping):
        c.err(path, "a vector is {instance_id, past: [events], new: [events], actions: [patterns]}")
        return None
    c.keys(raw, {"instance_id", "past", "new", "actions", "custom_status", "version", "compare", "history"}, path,
           "vector")
    history = raw.get("history", Reach.REACHABLE)
    if history not in tuple(Reach):
        c.err(path + ("history",), f"history {history!r}; use reachable (default: an engine can write it) or impossible "
                                   "(no engine writes it: the answer is only an observation, no answer a SHOULD)")
    compare = raw.get("compare", Compare.EXACT)
    if compare not in tuple(Compare):
        c.err(path + ("compare",), f"compare {compare!r}; use exact (default) or fuzz (the worker's comparison "
                                   "profile also applies, as in a fuzz campaign)")
    events: dict[str, list[Any]] = {"past": [], "new": []}
    for part in ("past", "new"):
        items = raw.get(part, [])
        if not isinstance(items, list):
            c.err(path + (part,), f"{part} is a list of events like {{TaskScheduled: {{name: echo}}, eventId: 1}}")
            continue
        for i, item in enumerate(items):
            try:
                events[part].append(parse_event(item, index=len(events["past"]) + i if part == "new" else i))
            except WireError as exc:
                c.err(path + (part, i), str(exc))
    if not events["new"]:
        c.err(path + ("new",), "a turn needs at least one new event (a WorkflowStarted)")
    actions = raw.get("actions")
    if not isinstance(actions, list):
        c.err(path + ("actions",), "actions is the list of expected action patterns, e.g. [{ScheduleTask: {id: 1, name: echo}}]")
        actions = []
    return Vector(instance_id=str(raw.get("instance_id", "vector")), past=tuple(events["past"]),
                  new=tuple(events["new"]), actions=tuple(actions), custom_status=raw.get("custom_status", MISSING),
                  version=raw.get("version"), compare=Compare(compare) if compare in tuple(Compare) else Compare.EXACT,
                  history=Reach(history) if history in tuple(Reach) else Reach.REACHABLE)


def discover(root: Path, *, patterns: Sequence[str] = ()) -> list[Path]:
    """Scenario files under `root` (sorted); `patterns` are globs on the scenario id."""
    import fnmatch

    files = sorted(p for p in root.rglob("*.yaml") if p.is_file())
    if patterns:
        files = [p for p in files if any(fnmatch.fnmatch(p.relative_to(root).with_suffix("").as_posix(), pat)
                                         for pat in patterns)]
    return files


def load_all(root: Path, *, patterns: Sequence[str] = ()) -> list[Scenario]:
    """Every scenario under `root`; an InputError lists the problems of all files together."""
    problems: list[Problem] = []
    out = []
    for path in discover(root, patterns=patterns):
        try:
            out.append(load_scenario(path, root=root))
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise _bad_scenarios(problems)
    return out
