"""What scenario steps and the scenario model share: the sentinel for a key left out, the statuses an
instance can be expected in, and how a start and an expected error are written. Its own module so that
the steps (conformance/scenario/steps.py) and the model that holds them import it without importing each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from conformance.scenario.source import Span


class _Missing:
    """The sentinel for a key a scenario leaves out; one object, pickled by name (scenarios cross processes)."""

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class InstanceStatus(enum.StrEnum):
    """An instance's runtime status as scenarios spell it (OrchestrationStatus without its prefix)."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TERMINATED = "TERMINATED"
    CANCELED = "CANCELED"
    PENDING = "PENDING"
    SUSPENDED = "SUSPENDED"
    STALLED = "STALLED"


STATUSES = tuple(InstanceStatus)


@dataclass(frozen=True)
class ErrorExpect:
    codes: tuple[str, ...] = ()  # any of these gRPC codes; empty: any non-OK
    details: str | None = None  # a regex searched in the status details


@dataclass(frozen=True)
class StartSpec:
    name: str  # the instance's name in the scenario ("main" by default); `${name}` is its id
    workflow: str
    input: Any = MISSING
    scheduled_in: float | None = None
    instance_id: str | None = None  # a fixed id (placeholders allowed); default: generated per run
    expect_error: ErrorExpect | None = None
    span: Span | None = None
    app: str | None = None  # several apps: through whose sidecar (None: the first app's)
