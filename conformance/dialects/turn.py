"""A turn a worker is sent: the committed history before it and the delivered events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from taskhub_wire import pb


class KnownAnswer(Protocol):
    """The reference worker's answer to a turn (a fake_worker TurnResult), as far as turns use it."""

    def response(self, *, instance_id: str, completion_token: str) -> pb.WorkflowResponse: ...


@dataclass(frozen=True)
class TurnCase:
    """One turn a worker is sent: the committed history before it and the delivered events."""

    instance_id: str
    past: tuple[pb.HistoryEvent, ...]
    new: tuple[pb.HistoryEvent, ...]
    form: str  # dispatched | redelivered (an attempt that was abandoned) | segment | mutated
    note: str = ""
    answer: KnownAnswer | None = None  # the reference's answer, when already known
    stripped: bool = False  # a dialect removed 9999-12-31 timers from it (history.py)
    got: pb.WorkflowResponse | None = None  # the worker's own answer, when its answers drove the schedule
    committed: bool = False  # the engine committed `got` (else it abandoned or never got it)


def copy_event(ev: pb.HistoryEvent) -> pb.HistoryEvent:
    out = pb.HistoryEvent()
    out.CopyFrom(ev)
    return out
