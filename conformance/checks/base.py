"""What a check reads and how checks register: the observations of a finished scenario run, the
registry, and `fail`.

A flow scenario's run is a `FlowObservation` (what the harness saw of its instances), a vector's a
`VectorObservation` (the worker's answer to one turn); a check declares which it reads. A check
raises `TargetMisbehaved` (conformance.failures) with all its mismatches; the runner judges them
and renders the failures once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskhub_core.incidents import Incident

from conformance.failures import TargetMisbehaved
from conformance.scenario.model import Scenario
from conformance.scenario.placeholders import substitute
from conformance.verdict import Mismatch

Replay = Callable[[str, Sequence[Any], Sequence[Any]], "dict[str, Any] | None"]  # (iid, past, new) -> answer


@dataclass(frozen=True, kw_only=True)
class FlowObservation:
    """What the harness saw of one flow scenario's run."""

    scenario: Scenario
    instances: Mapping[str, str]  # scenario instance name -> instance id
    states: Mapping[str, Mapping[str, Any]]  # instance id -> GetInstance view (status, output, custom_status, ...)
    histories: Mapping[str, list[dict[str, Any]]]  # instance id -> event dicts (conformance.scenario.wire.event_dict)
    raw_histories: Mapping[str, list[Any]] = field(default_factory=dict)  # instance id -> pb.HistoryEvent
    keys: Mapping[str, str] = field(default_factory=dict)  # expectation key -> instance id (step captures included)
    ledger: Sequence[Mapping[str, Any]] = ()
    replay: Replay | None = None  # a fresh worker's answer to a turn; None: the target cannot replay
    counters: Mapping[str, int] = field(default_factory=dict)  # engine counters (reference sidecar only)
    # What the engine refused, redelivered or dropped, per instance id (taskhub_core.incidents); None: the
    # engine keeps no such record (only the reference sidecar does).
    incidents: Mapping[str, tuple[Incident, ...]] | None = None
    zombie_results: Sequence[str] = ()  # payloads sent with stale tokens
    reproduce: str = ""
    engine: str = ""  # the sidecar target's kind: rules the engines legitimately apply differently (checks/history.py)


@dataclass(frozen=True, kw_only=True)
class VectorObservation:
    """The worker's answer to one vector's turn, with what the runner knows about that turn."""

    scenario: Scenario
    answer: Mapping[str, Any] | None  # None: no answer in time
    expected: tuple[Any, ...] | None = None  # the vector's actions in the worker's dialect (dialects/vectors.py)
    note: str = ""  # how the vector was rewritten for the worker's dialect
    foreign: str = ""  # why no engine writes this history for this worker ("": one does; docs/verdicts.md)
    overridden: bool = False  # the turn delivers ExecutionTerminated: the engine applies none of the answer
    held: bool = False  # the turn leaves the instance suspended: an answer may hold its actions (EVT-SUSP-001)
    # Ids the turn's history already holds for an action, in the answer's numbering: id -> (action kind,
    # name); an optional timer's id is left out, since another action may take it (HIST-EVENTID-001).
    recorded: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    reproduce: str = ""


Observation = FlowObservation | VectorObservation
Observed = FlowObservation  # the flow checks' observation, under its old name


@dataclass(frozen=True)
class Check:
    name: str
    fn: Callable[[Any], None]
    reads: type  # FlowObservation or VectorObservation
    always: bool  # run on every scenario of its sort, listed or not


CheckFn = Callable[[Any], None]
REGISTRY: dict[str, Check] = {}
CHECKS: dict[str, CheckFn] = {}  # name -> function (REGISTRY's functions)
ALWAYS: list[str] = []  # the flow checks every flow scenario runs


def check(name: str, *, always: bool = False, vector: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register a check; `always` checks run on every flow scenario, others when a scenario lists them;
    `vector` checks read a `VectorObservation`, the others a `FlowObservation`."""

    def register(fn: CheckFn) -> CheckFn:
        if name in REGISTRY:
            raise ValueError(f"check {name!r} is registered twice")
        REGISTRY[name] = Check(name, fn, VectorObservation if vector else FlowObservation, always)
        CHECKS[name] = fn
        if always:
            ALWAYS.append(name)
        return fn

    return register


def run_check(name: str, obs: Observation) -> None:
    """Run check `name` on `obs` (a check never reads the other sort of observation)."""
    entry = REGISTRY[name]
    if not isinstance(obs, entry.reads):
        raise TypeError(f"check {name!r} reads a {entry.reads.__name__}, not a {type(obs).__name__}")
    entry.fn(obs)


def fail(obs: Observation, name: str, mismatches: Sequence[str | Mismatch]) -> None:
    if mismatches:
        raise TargetMisbehaved(check=name, mismatches=mismatches, reproduce=obs.reproduce)


def resolve_instance(obs: FlowObservation, key: str) -> str:
    """An expectation key: an instance name, or an id pattern with `${name}` placeholders (instance names, or
    values a `call` step captured, as the run resolved them)."""
    if key in obs.keys:
        return obs.keys[key]
    if key in obs.instances:
        return obs.instances[key]
    return str(substitute(key, ids=obs.instances))
