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


class Outcome(str, enum.Enum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    NOT_IMPLEMENTED = "NOT_IMPLEMENTED"  # a declared gap of the target
    NOT_APPLICABLE = "NOT_APPLICABLE"  # the target lacks a capability the scenario requires
    ERROR = "ERROR"  # the harness or the target could not run the scenario


@dataclass(frozen=True)
class TranscriptEntry:
    """One protocol message seen by the harness (through the proxy or its own client)."""

    t: float  # seconds since the scenario started
    channel: str  # "worker" (worker <-> sidecar, via the proxy) or "client" (harness <-> sidecar)
    direction: str  # "request" (to the sidecar), "response" (unary answer), "item" (stream item to the worker)
    rpc: str  # method name, e.g. "CompleteActivityTask"
    summary: str  # one line for humans
    message: dict[str, Any] = field(default_factory=dict)  # the decoded message (may be truncated)
    fault: str | None = None  # the fault applied to this message, if any
    status: str | None = None  # gRPC status of a failed call


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
    message: str = ""  # failure text: every mismatch, then "Reproduce with: ..."
    reproduce: str = ""  # the exact command that runs this scenario on this pair again
    gap_reason: str = ""  # for NOT_IMPLEMENTED / NOT_APPLICABLE: why
    gap_passed: bool = False  # a declared gap that passed: remove it from targets.yaml
    transcript: tuple[TranscriptEntry, ...] = ()
    source: str = ""  # file path of the scenario
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


def from_json(line: str) -> Event:
    raw = json.loads(line)
    cls = _KINDS.get(raw.get("kind"))
    if cls is None:
        raise ValueError(f"not a conformance event: kind {raw.get('kind')!r}")
    if cls is ScenarioFinished:
        raw["outcome"] = Outcome(raw["outcome"])
        raw["requirements"] = tuple(raw["requirements"])
        raw["transcript"] = tuple(TranscriptEntry(**t) for t in raw.get("transcript", ()))
    if cls is RunStarted:
        raw["pairs"] = tuple(raw["pairs"])
    return cls(**raw)
