"""The step registry: every step kind a scenario can write, its typed arguments and how they are written.

One entry per kind (`STEPS`): the frozen class its arguments load into, and for each argument its
YAML key, its JSON schema and how it is checked. The loader validates steps from it
(conformance/scenario/loader.py), the runner dispatches on the argument classes
(conformance/runner/steps.py: one handler per class) and the JSON schema's step definitions are
generated from it (conformance/scenario/schema.py). A new step kind is one class here and one
handler there; nothing else lists kinds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance.scenario.basics import MISSING, STATUSES, ErrorExpect, StartSpec
from conformance.scenario.source import Span, did_you_mean

Path = tuple[Any, ...]  # keys and indices from the document's root


class Checks(Protocol):
    """What argument checks need of the loader (its problem list and the checks it owns)."""

    def err(self, path: Path, message: str) -> None: ...

    def keys(self, data: Mapping[str, Any], allowed: Iterable[str], path: Path, what: str) -> None: ...

    def duration(self, value: Any, path: Path) -> float: ...

    def programs(self, raw: Any, path: Path) -> None: ...


# ------------------------------------------------------------------------------- value types


@dataclass(frozen=True, kw_only=True)
class ValueType:
    """How one argument's value is written (its JSON schema) and read (checked, then typed)."""

    schema: Mapping[str, Any]
    # (checks, key, value, path of the value) -> the typed value; a problem is reported on `checks`.
    read: Callable[[Checks, str, Any, Path], Any]


def _typed(kind: type, name: str) -> Callable[[Checks, str, Any, Path], Any]:
    def read(c: Checks, key: str, value: Any, path: Path) -> Any:
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            c.err(path, f"'{key}' must be a {name}, not {type(value).__name__}")
            return None
        return value

    return read


def _statuses(c: Checks, key: str, value: Any, path: Path) -> tuple[str, ...]:
    if not isinstance(value, (str, list)):
        c.err(path, f"'{key}' must be a status or a list of statuses, not {type(value).__name__}")
        return ()
    wanted = [value] if isinstance(value, str) else value
    for s in wanted:
        if s not in STATUSES:
            c.err(path, f"{s!r} is not a status{did_you_mean(s, STATUSES)}; known: {', '.join(STATUSES)}")
    return tuple(map(str, wanted))


def _instance_name(c: Checks, key: str, value: Any, path: Path) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        c.err(path, f"{value!r} is not an instance name (letters, digits, '_')")
    return str(value)


def _programs(c: Checks, key: str, value: Any, path: Path) -> Mapping[str, Any]:
    c.programs(value, path)
    return dict(value) if isinstance(value, Mapping) else {}


def _versions(c: Checks, key: str, value: Any, path: Path) -> Mapping[str, tuple[str, ...]]:
    # Checked against the programs in effect by the loader's reference check, which knows them.
    if not isinstance(value, Mapping):
        return {}
    return {str(k): tuple(map(str, v)) for k, v in value.items() if isinstance(v, list)}


def _unary_rpc(c: Checks, key: str, value: Any, path: Path) -> str:
    unary, streams = _rpc_names()
    if value in streams:
        c.err(path, f"{value!r} is a streaming method; call takes a unary one: {', '.join(sorted(unary))}")
    elif value not in unary:
        c.err(path, f"unknown rpc {value!r}{did_you_mean(value, unary)}; known: {', '.join(sorted(unary))}")
    return str(value)


def _rpc_names() -> tuple[list[str], list[str]]:
    from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, Kind

    methods = [*TASKHUB.methods.values(), *DAPR_WORKFLOW.methods.values()]
    return [m.name for m in methods if m.kind is Kind.UNARY], [m.name for m in methods if m.kind is not Kind.UNARY]


def _mapping(message: str) -> Callable[[Checks, str, Any, Path], Any]:
    def read(c: Checks, key: str, value: Any, path: Path) -> Any:
        if not isinstance(value, Mapping):
            c.err(path, message)
            return {}
        return dict(value)

    return read


def _call_expect(c: Checks, key: str, value: Any, path: Path) -> Any:
    if not isinstance(value, Mapping):
        c.err(path, "expect is {response: pattern}")
        return MISSING
    for k in value:
        if k != "response":
            c.err(path + (k,), f"unknown key {k!r} in a call's expect; allowed: response")
    return value.get("response", MISSING) if value.get("response") is not None else MISSING


def _event_patterns(c: Checks, key: str, value: Any, path: Path) -> tuple[Any, ...] | None:
    from conformance.scenario.matching import event_pattern_problem

    if not isinstance(value, list) or not value:
        c.err(path, f"'{key}' is a list of history event patterns: Kind, {{Kind: {{field: value}}}} or \"*\"")
        return None
    for i, pattern in enumerate(value):
        why = event_pattern_problem(pattern)
        if why is not None:
            c.err(path + (i,), why)
    return tuple(value)


def _metadata(c: Checks, key: str, value: Any, path: Path) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        c.err(path, "metadata is a mapping of header to value; it replaces the harness's own")
        return ()
    return tuple((str(k), str(v)) for k, v in value.items())


TEXT = ValueType(schema={"type": "string"}, read=_typed(str, "str"))
FLAG = ValueType(schema={"type": "boolean"}, read=_typed(bool, "bool"))
JSON = ValueType(schema={}, read=lambda c, key, value, path: value)  # any JSON value; placeholders allowed
DURATION = ValueType(schema={"$ref": "#/$defs/duration"}, read=lambda c, key, value, path: c.duration(value, path))
STATUS_LIST = ValueType(schema={"oneOf": [{"$ref": "#/$defs/status"},
                                          {"type": "array", "items": {"$ref": "#/$defs/status"}, "minItems": 1}]},
                        read=_statuses)
INSTANCE_NAME = ValueType(schema={"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, read=_instance_name)
# `unregistered` is checked with the workflow it excuses (the loader's reference check), so the two
# problems of one start come in the order a reader fixes them.
UNREGISTERED = ValueType(schema={"type": "boolean"}, read=lambda c, key, value, path: value is True)
PROGRAMS = ValueType(schema={"type": "object",
                             "additionalProperties": {"$ref": "../../taskhub_programs/program.schema.json#/$defs/program"}},
                     read=_programs)
VERSIONS = ValueType(schema={"type": "object",
                             "additionalProperties": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
                     read=_versions)
UNARY_RPC = ValueType(schema={"enum": None}, read=_unary_rpc)  # the enum is filled from taskhub_wire.rpc
REQUEST = ValueType(schema={"type": "object"}, read=_mapping("request is a mapping: the request in proto JSON"))
CALL_EXPECT = ValueType(schema={"type": "object", "properties": {"response": {
    "description": "A pattern for the response in proto JSON: mappings match by subset, lists item by item; "
                   "\"*\", \"re:<regex>\", \"!absent\"."}}, "additionalProperties": False}, read=_call_expect)
EVENT_PATTERNS = ValueType(schema={"type": "array", "minItems": 1}, read=_event_patterns)
METADATA = ValueType(schema={"type": "object", "additionalProperties": {"type": "string"}}, read=_metadata)


def schema_of(value: ValueType) -> dict[str, Any]:
    """The value's JSON schema (the rpc enum is the wire's unary methods)."""
    if value is UNARY_RPC:
        return {"enum": _rpc_names()[0]}
    return dict(value.schema)


# ---------------------------------------------------------------------------------- arguments


@dataclass(frozen=True, kw_only=True)
class Arg:
    """One argument as written: its YAML key, value type, documentation, and the message when it is missing."""

    key: str
    value: ValueType
    doc: str = ""
    missing: str | None = None  # set: the argument is required; the problem said at the step


def arg(key: str, value: ValueType, *, doc: str = "", default: Any = None, missing: str | None = None,
        factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field of an argument class, with how it is written."""
    meta = {"arg": Arg(key=key, value=value, doc=doc, missing=missing)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def args_of(cls: type) -> tuple[tuple[str, Arg], ...]:
    """(field name, Arg) of an argument class, in declaration order."""
    return tuple((f.name, f.metadata["arg"]) for f in dataclasses.fields(cls))


_INSTANCE_DOC = "An instance name (from start/as) or an id; ${name} becomes the id of instance `name`. Default: main."


@dataclass(frozen=True, kw_only=True)
class OnInstance:
    """Arguments of a step that acts on one instance the scenario started (checked by the loader)."""

    instance: str = arg("instance", TEXT, doc=_INSTANCE_DOC, default="main")


@dataclass(frozen=True, kw_only=True)
class Start:
    workflow: str = arg("workflow", TEXT, doc="The workflow name.", default="",
                        missing="missing required key 'workflow'")
    input: Any = arg("input", JSON, doc="The input (any JSON value; ${name} placeholders allowed).", default=MISSING)
    name: str = arg("as", INSTANCE_NAME, doc="The instance's name in this scenario (default main).", default="main")
    instance_id: str | None = arg("instance_id", TEXT, doc="A fixed id (default: generated per run).")
    scheduled_in: float | None = arg("scheduled_in", DURATION, doc="Start this much later (scheduledStartTimestamp).")
    unregistered: bool = arg("unregistered", UNREGISTERED, default=False,
                             doc="true: the workflow is defined nowhere on purpose (validation otherwise rejects a "
                                 "start of an undefined program).")
    app: str | None = arg("app", TEXT, doc="Several apps: start it through this app's sidecar (default: the first "
                                           "app).")

    def spec(self, *, expect_error: ErrorExpect | None, span: Span) -> StartSpec:
        return StartSpec(name=self.name, workflow=self.workflow, input=self.input, scheduled_in=self.scheduled_in,
                         instance_id=self.instance_id, expect_error=expect_error, span=span, app=self.app)


@dataclass(frozen=True, kw_only=True)
class Wait(OnInstance):
    statuses: tuple[str, ...] = arg("status", STATUS_LIST, doc="The status (or any of the statuses) to wait for.",
                                    default=(), missing="wait needs a status (or a list of statuses)")
    timeout: float | None = arg("timeout", DURATION, doc="Default: the scenario's timeout.")


@dataclass(frozen=True, kw_only=True)
class WaitHistory(OnInstance):
    contains_in_order: tuple[Any, ...] = arg(
        "contains_in_order", EVENT_PATTERNS, default=(),
        doc="Event patterns the history must show in this order, other events between them allowed (as in "
            "expect.history.contains_in_order).",
        missing="wait_history needs the events to wait for: {contains_in_order: [Kind, {Kind: {field: value}}]}")
    timeout: float | None = arg("timeout", DURATION, doc="Default: the scenario's timeout.")


@dataclass(frozen=True, kw_only=True)
class Raise(OnInstance):
    event: str = arg("event", TEXT, doc="The event name.", default="",
                     missing="raise needs an event name: {event: NAME, data: ...}")
    data: Any = arg("data", JSON, doc="The event payload (any JSON value); absent: no input.", default=MISSING)


@dataclass(frozen=True, kw_only=True)
class Suspend(OnInstance):
    reason: str | None = arg("reason", TEXT)


@dataclass(frozen=True, kw_only=True)
class Resume(OnInstance):
    reason: str | None = arg("reason", TEXT)


@dataclass(frozen=True, kw_only=True)
class Terminate(OnInstance):
    output: Any = arg("output", JSON, doc="The termination output (any JSON value).", default=MISSING)
    recursive: bool = arg("recursive", FLAG, default=False)


@dataclass(frozen=True, kw_only=True)
class Purge(OnInstance):
    recursive: bool = arg("recursive", FLAG, default=False)
    force: bool | None = arg("force", FLAG)


@dataclass(frozen=True, kw_only=True)
class WorkerArgs:
    programs: Mapping[str, Any] = arg("programs", PROGRAMS, doc="Programs replacing those of the same name.",
                                      factory=dict)
    versions: Mapping[str, tuple[str, ...]] = arg("versions", VERSIONS, factory=dict,
                                                  doc="Workflow name -> the versions this deployment keeps.")
    app: str | None = arg("app", TEXT, doc="Several apps: the app this acts on (default: the first app).")


@dataclass(frozen=True, kw_only=True)
class RestartWorker(WorkerArgs):
    pass


@dataclass(frozen=True, kw_only=True)
class StartWorker(WorkerArgs):
    pass


@dataclass(frozen=True, kw_only=True)
class StopWorker:
    app: str | None = arg("app", TEXT, doc="Several apps: the app this acts on (default: the first app).")


@dataclass(frozen=True, kw_only=True)
class AddWorker:
    pass


_SIDECAR_APP_DOC = ("Several apps: only this app's sidecar (on daprd that app's daprd; the reference sidecar hosts "
                    "every app in one process, which restarts whole).")


@dataclass(frozen=True, kw_only=True)
class KillSidecar:
    app: str | None = arg("app", TEXT, doc=_SIDECAR_APP_DOC)


@dataclass(frozen=True, kw_only=True)
class RestartSidecar:
    app: str | None = arg("app", TEXT, doc=_SIDECAR_APP_DOC)


@dataclass(frozen=True, kw_only=True)
class AdvanceClock:
    seconds: float = arg("by", DURATION, default=0.0, missing="advance_clock needs a duration: {by: 10s} or 10s")


@dataclass(frozen=True, kw_only=True)
class Sleep:
    seconds: float = arg("for", DURATION, default=0.0, missing="sleep needs a duration: {for: 1s} or 1s")


@dataclass(frozen=True, kw_only=True)
class Call:
    rpc: str = arg("rpc", UNARY_RPC, doc="A unary method name.", default="",
                   missing="call needs an rpc name (e.g. GetInstance) and a request")
    request: Mapping[str, Any] = arg("request", REQUEST, factory=dict,
                                     doc="The request in proto JSON (camelCase fields; ${name} placeholders allowed).")
    response: Any = arg("expect", CALL_EXPECT, default=MISSING)  # a pattern for the response
    metadata: tuple[tuple[str, str], ...] | None = arg(
        "metadata", METADATA,
        doc="Exactly these gRPC metadata headers instead of the harness's own (e.g. {} to send no API token).")
    within: float | None = arg(
        "within", DURATION,
        doc="Wait for a state: repeat the call until its response matches `expect` or this long has passed "
            "(the last mismatch is the failure). Default: one call.")
    app: str | None = arg("app", TEXT, doc="Several apps: call this app's sidecar (default: the first app).")


@dataclass(frozen=True, kw_only=True)
class ReleaseReplays:
    pass


@dataclass(frozen=True, kw_only=True)
class CutStreams:
    app: str | None = arg("app", TEXT, doc="Several apps: the app this acts on (default: the first app).")


StepArgs = (Start | Wait | WaitHistory | Raise | Suspend | Resume | Terminate | Purge | RestartWorker | StartWorker | StopWorker
            | KillSidecar | RestartSidecar | AdvanceClock | Sleep | Call | ReleaseReplays | CutStreams)


# ----------------------------------------------------------------------------------- registry


@dataclass(frozen=True, kw_only=True)
class StepKind:
    name: str  # the key a scenario writes
    args: type  # the frozen class its arguments load into
    doc: str
    scalar: str | None = None  # `- sleep: 1s` is short for `- sleep: {for: 1s}`: the key a bare value is
    connection: bool = False  # it stops, starts or cuts connections: the scenario needs the engine alone
    shared: str | None = None  # the schema's $defs entry of its arguments, when several kinds share it

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(a.key for _, a in args_of(self.args))


STEPS: Mapping[str, StepKind] = {k.name: k for k in (
    StepKind(name="start", args=Start, shared="start_args",
             doc="StartInstance; returns when the first turn committed (unless scheduled_in)."),
    StepKind(name="wait", args=Wait, doc="Poll GetInstance until the instance reaches the status."),
    StepKind(name="wait_history", args=WaitHistory, scalar="contains_in_order",
             doc="Read GetInstanceHistory until the history shows these events in order (a state reached, where a "
                 "fixed sleep would race a loaded machine)."),
    StepKind(name="raise", args=Raise, doc="RaiseEvent."),
    StepKind(name="suspend", args=Suspend, doc="SuspendInstance."),
    StepKind(name="resume", args=Resume, doc="ResumeInstance."),
    StepKind(name="terminate", args=Terminate, doc="TerminateInstance."),
    StepKind(name="purge", args=Purge, doc="PurgeInstances of one instance."),
    StepKind(name="restart_worker", args=RestartWorker, shared="worker_args", connection=True,
             doc="Stop the worker and start it again, optionally with other programs or fewer versions."),
    StepKind(name="start_worker", args=StartWorker, shared="worker_args", connection=True,
             doc="Start a worker (after stop_worker)."),
    StepKind(name="stop_worker", args=StopWorker, connection=True, doc="Stop the worker (its streams close)."),
    StepKind(name="add_worker", args=AddWorker, connection=True,
             doc="Start one more worker with the current programs beside the running one (several workers on one "
                 "engine); stop_worker and restart_worker act on the first only."),
    StepKind(name="kill_sidecar", args=KillSidecar, connection=True,
             doc="Kill the sidecar abruptly (requires: [restart])."),
    StepKind(name="restart_sidecar", args=RestartSidecar, connection=True,
             doc="Start the sidecar again on the same store and address."),
    StepKind(name="advance_clock", args=AdvanceClock, scalar="by",
             doc="Move the virtual clock forward (sidecar: {clock: virtual})."),
    StepKind(name="sleep", args=Sleep, scalar="for", doc="Wait this long."),
    StepKind(name="call", args=Call,
             doc="Call any unary RPC of TaskHubSidecarService or of the Dapr runtime workflow API."),
    StepKind(name="release_replays", args=ReleaseReplays, connection=True,
             doc="Fire the copies held by replay_later faults without replay_after_s."),
    StepKind(name="cut_streams", args=CutStreams, connection=True,
             doc="Break the worker's GetWorkItems streams at the proxy."),
)}
KIND_OF: Mapping[type, StepKind] = {k.args: k for k in STEPS.values()}


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of a flow scenario: its typed arguments (their class is its kind), where it is written."""

    args: StepArgs
    span: Span
    expect_error: ErrorExpect | None = None  # the step passes only if its RPC fails so

    @property
    def kind(self) -> StepKind:
        return KIND_OF[type(self.args)]


def read_args(c: Checks, kind: StepKind, raw: Mapping[str, Any], path: Path, *, what: str,
              extra: frozenset[str] = frozenset()) -> Any:
    """The typed arguments of `kind` from `raw` (a mapping); every problem is reported on `c`.

    `extra` keys are allowed and left to the caller (a scenario's first `start` takes expect_error).
    """
    c.keys(raw, kind.keys | extra, path, what)
    values: dict[str, Any] = {}
    for name, a in args_of(kind.args):
        if a.key not in raw:
            if a.missing is not None:
                c.err(path, a.missing)
            continue
        value = a.value.read(c, a.key, raw[a.key], path + (a.key,))
        if value is not None or a.value is JSON:  # None: a problem was reported (JSON's null is a value)
            values[name] = value
    return kind.args(**values)
