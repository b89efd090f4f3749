"""What an engine refused, redelivered or dropped for an instance, as data (docs/verdicts.md "Root causes").

The reference engine records these per instance; the harness reads them after a scenario and puts
those of a failed scenario's instances into its failure text, and uses a refused answer as the root
cause of the mismatches it leads to (conformance/attribution.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class IncidentKind(enum.StrEnum):
    STALE_ANSWER = "stale answer"  # R3.14: an action id already in history; the turn is redelivered
    MALFORMED_ANSWER = "malformed answer"  # R3.13: an action the engine cannot record; redelivered
    ANSWER_NOT_APPLIED = "answer not applied"  # another reason the turn was abandoned (no worker for an app, ...)
    STALLED_AFTER_REFUSALS = "stalled after refusals"  # R3.14 b: refused so often the instance stalled
    STALE_TOKEN = "stale token"  # a completion with a zombie's token, ignored (TOK-STALE-001)
    NO_PENDING = "no pending dispatch"  # a completion for nothing out, ignored (TOK-NOPEND-001)
    DUPLICATE_DROPPED = "duplicate dropped"  # a resolution already in history, dropped (R2.7)
    REDELIVERED = "redelivered"  # out on a stream that closed, or a lease that ran out: dispatched again


# What the worker did wrong, as opposed to what the engine did for the worker's sake.
REFUSED_ANSWERS = frozenset({IncidentKind.STALE_ANSWER, IncidentKind.MALFORMED_ANSWER,
                             IncidentKind.STALLED_AFTER_REFUSALS})


@dataclass(frozen=True, slots=True, kw_only=True)
class StaleAction:
    """A refused answer's action whose id is already in committed history (R3.14)."""

    id: int
    kind: str  # the action's field, e.g. "scheduleTask"
    holder: str  # the history event holding the id, e.g. "taskScheduled"
    holder_name: str = ""  # the holder's activity / child name
    holder_failed: bool = False  # the holder's operation failed in history: the answer reads as a retry

    @property
    def text(self) -> str:
        return f"action id {self.id} ({self.kind}) is already in history as {self.holder}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Incident:
    kind: IncidentKind
    instance: str
    text: str  # what the engine did and why, as its log says it
    action: StaleAction | None = None  # for a stale answer
    count: int = 1  # the same incident in a row (a refused turn is redelivered and refused again)

    def line(self) -> str:
        return f"{self.kind.value}: {self.text}" + (f" (x{self.count})" if self.count > 1 else "")


__all__ = ["Incident", "IncidentKind", "REFUSED_ANSWERS", "StaleAction"]
