"""The runner's event stream: every report (terminal, JUnit, allure, summary.json, matrix) consumes it.

Events are frozen records; `to_json`/`from_json` round-trip them through
`reports/events.jsonl`, so `conformance report` can rebuild every report from a
finished run.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Any

from taskhub_core.incidents import Incident, IncidentKind, StaleAction

from conformance.failures import Failure
from conformance.verdict import Level, Outcome


class Channel(enum.StrEnum):
    WORKER = "worker"  # worker <-> sidecar, through the proxy
    CLIENT = "client"  # harness <-> sidecar


class MessageDirection(enum.StrEnum):
    REQUEST = "request"  # to the sidecar
    RESPONSE = "response"  # a unary call's answer
    ITEM = "item"  # a stream item to the worker


@dataclass(frozen=True)
class TranscriptEntry:
    """One protocol message seen by the harness (through the proxy or its own client)."""

    t: float  # seconds since the scenario started
    channel: Channel
    direction: MessageDirection
    rpc: str  # method name, e.g. "CompleteActivityTask"
    summary: str  # one line for humans
    message: dict[str, Any] = field(default_factory=dict)  # the decoded message (may be truncated)
    fault: str | None = None  # the fault applied to this message, if any
    status: str | None = None  # gRPC status of a failed call

    def __post_init__(self) -> None:
        # Built from the proxy's and the client's plain names, and from events.jsonl: typed here, once.
        object.__setattr__(self, "channel", Channel(self.channel))
        object.__setattr__(self, "direction", MessageDirection(self.direction))


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    started_at: float  # unix time
    pairs: tuple[str, ...]  # target pair labels, e.g. "reference+reference"
    scenario_count: int
    command: str  # the command line that reproduces the run
    kind: str = "run_started"


@dataclass(frozen=True)
class ScenarioStarted:
    scenario: str  # scenario id (its path under scenarios/, without .yaml)
    pair: str
    kind: str = "scenario_started"


@dataclass(frozen=True)
class ScenarioFinished:
    scenario: str
    pair: str
    sidecar: str  # sidecar target name
    worker: str  # worker target name
    outcome: Outcome
    duration_s: float
    requirements: tuple[str, ...]
    title: str = ""
    message: str = ""  # failure text, rendered once from `failures` (conformance.failures.render), or the error
    reproduce: str = ""  # the exact command that runs this scenario on this pair again
    gap_reason: str = ""  # for KNOWN_FAILURE / NOT_APPLICABLE: why
    gap_passed: bool = False  # a declared gap that passed (or only differed): remove or narrow it
    # Per requirement: its verdict in this run (an Outcome value), the scenario's requirements and any a
    # check named; empty for results written before verdict levels (then every requirement has `outcome`).
    verdicts: tuple[tuple[str, Outcome], ...] = ()
    broken: tuple[str, ...] = ()  # the MUST requirements this run breaks (FAILED or KNOWN_FAILURE)
    observations: tuple[tuple[str, str], ...] = ()  # (field, text): differences the contract allows
    failures: tuple[Failure, ...] = ()  # every mismatch, per requirement it weighs on (conformance.failures)
    incidents: tuple[Incident, ...] = ()  # what the engine refused, redelivered or dropped (taskhub_core.incidents)
    transcript: tuple[TranscriptEntry, ...] = ()
    source: str = ""  # file path of the scenario
    started_at: float = 0.0  # unix time the scenario started (0 in results written before it was kept)
    kind: str = "scenario_finished"


@dataclass(frozen=True)
class RunFinished:
    run_id: str
    finished_at: float
    duration_s: float
    counts: dict[str, int]  # outcome name -> count
    kind: str = "run_finished"


Event = RunStarted | ScenarioStarted | ScenarioFinished | RunFinished
_KINDS = {cls.kind: cls for cls in (RunStarted, ScenarioStarted, ScenarioFinished, RunFinished)}  # type: ignore[attr-defined]


def to_json(event: Event) -> str:
    return json.dumps(dataclasses.asdict(event), default=lambda o: o.value if isinstance(o, enum.Enum) else str(o))


def _incident(raw: dict[str, Any]) -> Incident:
    action = raw.get("action")
    return Incident(**{**raw, "kind": IncidentKind(raw["kind"]),
                       "action": StaleAction(**action) if action is not None else None})


def from_json(line: str) -> Event:
    raw = json.loads(line)
    cls = _KINDS.get(raw.get("kind"))
    if cls is None:
        raise ValueError(f"not a conformance event: kind {raw.get('kind')!r}")
    if cls is ScenarioFinished:
        raw["outcome"] = Outcome(raw["outcome"])
        raw["requirements"] = tuple(raw["requirements"])
        raw["verdicts"] = tuple((r, Outcome(v)) for r, v in raw.get("verdicts", ()))
        raw["broken"] = tuple(raw.get("broken", ()))
        raw["observations"] = tuple(tuple(o) for o in raw.get("observations", ()))
        raw["failures"] = tuple(Failure(**{**f, "level": Level(f["level"])}) for f in raw.get("failures", ()))
        raw["transcript"] = tuple(TranscriptEntry(**t) for t in raw.get("transcript", ()))
        raw["incidents"] = tuple(_incident(i) for i in raw.get("incidents", ()))
    if cls is RunStarted:
        raw["pairs"] = tuple(raw["pairs"])
    return cls(**raw)
