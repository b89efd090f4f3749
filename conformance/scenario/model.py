"""The scenario model: frozen records with the source span of each part.

A scenario is either a *flow* (start workflows, act on them over time, then
check statuses, outputs, histories, ledgers) or a *vector* (one turn: a history
in, the exact actions a worker must answer out).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from taskhub_programs import Bundle

from conformance.scenario.engine import NO_SETTINGS, EngineSettings
from conformance.scenario.basics import MISSING, InstanceStatus, StartSpec
from conformance.scenario.source import Span
from conformance.scenario.steps import Step
from conformance.verdict import Subject


class Direction(enum.StrEnum):
    """Which side a run tests (DESIGN §1): a scenario applies to some, a pair runs in one."""

    SELF = "self"  # reference sidecar and reference worker
    WORKER = "worker"  # a worker under test on the reference sidecar
    ENGINE = "engine"  # a sidecar under test with the reference worker
    PAIR = "pair"  # both under test


DIRECTIONS = tuple(Direction)


@dataclass(frozen=True)
class HistoryExpect:
    contains_in_order: tuple[Any, ...] | None = None  # event patterns; "*" matches any run of events
    exactly: tuple[Any, ...] | None = None
    not_contains: tuple[str, ...] = ()
    count: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Expectation:
    status: InstanceStatus | None = None
    output: Any = MISSING
    custom_status: Any = MISSING
    failure_type: str | None = None
    failure_message: str | None = None  # regex
    stall_reason: str | None = None
    stall_description: str | None = None  # regex
    history: HistoryExpect | None = None
    exists: bool | None = None
    span: Span | None = None


@dataclass(frozen=True)
class LedgerExpect:
    """At-least-once accounting of the `record` activity (Jepsen-style classification)."""

    ok: int | None = None  # tasks with a completion in history and at least one execution
    lost: int = 0  # completed in history, never executed
    duplicated: int | None = None  # executed more than once (allowed for at-least-once; counted)
    unexpected: int = 0  # executed for a task the history does not schedule
    executions: int | None = None  # total executions


class ScenarioKind(enum.StrEnum):
    FLOW = "flow"  # the harness drives a sidecar and a worker over time
    VECTOR = "vector"  # one turn: a history and the exact answer a worker must send


class Compare(enum.StrEnum):
    """How a vector's expected actions are compared."""

    EXACT = "exact"  # the patterns as written
    FUZZ = "fuzz"  # also by the worker's comparison profile, as the fuzzer compared when it found the vector


class Reach(enum.StrEnum):
    """Whether an engine can write a vector's history."""

    REACHABLE = "reachable"
    IMPOSSIBLE = "impossible"  # a dropped or doubled ExecutionStarted, reordered markers: the answer is an observation


@dataclass(frozen=True)
class Vector:
    instance_id: str
    past: tuple[Any, ...]  # pb.HistoryEvent
    new: tuple[Any, ...]
    actions: tuple[Any, ...]  # expected action patterns, in order
    custom_status: Any = MISSING
    version: Mapping[str, Any] | None = None
    compare: Compare = Compare.EXACT  # conformance/dialects/compare.py; regression scenarios use FUZZ
    # IMPOSSIBLE: what the worker answers is an observation, no answer a SHOULD.
    history: Reach = Reach.REACHABLE


class AppWorker(enum.Enum):
    """Which worker an app of a several-app scenario runs."""

    TARGET = "target"  # the worker under test
    REFERENCE = "reference"  # the reference worker, for the other side of a call


@dataclass(frozen=True)
class AccessRule:
    """A rule of an app's workflow access policy (the `schedule` operation): which caller apps may
    schedule which workflows and activities (name globs) on it."""

    callers: tuple[str, ...]
    workflows: tuple[str, ...] = ()
    activities: tuple[str, ...] = ()


@dataclass(frozen=True)
class AppSpec:
    """One app of a several-app scenario: its id, the programs its worker hosts, which worker, and
    its workflow access policy (None: no policy, every call allowed; () a policy granting nothing).

    `policy_scopes`: the policy resource's `scopes` (None: this app alone); an app not in them does
    not load the policy (engine-rules R11.11). `namespace`: the app's own namespace (None: the
    scenario's, shared by the apps without one; R11.14). `max_body_size`: this app's own limit in
    bytes, over the scenario's `engine: {max_body_size}` (R11.15)."""

    name: str
    programs: tuple[str, ...]
    worker: AppWorker = AppWorker.TARGET
    span: Span | None = None
    access_policy: tuple[AccessRule, ...] | None = None
    policy_scopes: tuple[str, ...] | None = None
    namespace: str | None = None
    max_body_size: int | None = None


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    source: str
    requirements: tuple[str, ...]
    applies_to: tuple[str, ...]
    requires: tuple[str, ...]
    programs: Bundle
    programs_doc: Mapping[str, Any]  # the raw programs, for drivers that load a bundle file
    kind: ScenarioKind = ScenarioKind.FLOW
    sidecar: Mapping[str, Any] = field(default_factory=dict)  # options the reference sidecar needs
    engine: EngineSettings = NO_SETTINGS  # settings of the engine under test, whichever it is (engine.py)
    worker: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"adversary": [...]}
    starts: tuple[StartSpec, ...] = ()
    steps: tuple[Step, ...] = ()
    faults: tuple[Any, ...] = ()  # conformance.proxy FaultRule
    expect: Mapping[str, Expectation] = field(default_factory=dict)  # instance name or id pattern -> expectation
    ledger: LedgerExpect | None = None
    checks: tuple[str, ...] = ()
    # `charges:` subject -> requirement: where this scenario's mismatches of that subject weigh, stated in the
    # YAML (conformance/attribution.py; without it, the registry decides).
    charges: Mapping[Subject, str] = field(default_factory=dict)
    timeout: float = 30.0
    vector: Vector | None = None
    span: Span | None = None
    requirements_span: Span | None = None  # where `requirements:` is, for catalogue problems
    # Several apps (workflows across apps): the first is where starts, steps and expectations go unless
    # they name another. Empty: one app, as every scenario before apps.
    apps: tuple[AppSpec, ...] = ()
