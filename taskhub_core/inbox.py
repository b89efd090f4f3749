"""The inbox rules: when a timer is due, which timeout timer a raised event cancels (R6.3), what
a continue-as-new carries into the next generation, what an ended instance drops.

They work on any entries with `.event` and `.visible_at` (the sidecar's records, `InboxItem`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from taskhub_wire import pb

from taskhub_core.actions import execution_started
from taskhub_core.delivery import suspended_after
from taskhub_core.timestamps import NEVER_NS, ts_ns


class Entry(Protocol):
    @property
    def visible_at(self) -> int: ...

    @property
    def event(self) -> pb.HistoryEvent: ...


E = TypeVar("E", bound=Entry)


def timer_due_ns(fired: pb.HistoryEvent) -> int:
    """When a TimerFired may be taken: its fireAt, never for the 9999-12-31 sentinel (kept at
    NEVER_NS), and never 0 (0 means "at once", which a timer is not: R6.3 tells them apart)."""
    return max(min(ts_ns(fired.timerFired.fireAt), NEVER_NS), 1)


def is_timer(entry: Entry) -> bool:
    return entry.event.HasField("timerFired")


def timeout_to_cancel(entries: Iterable[E], *, name: str, timer_names: Mapping[int, str], now_ns: int) -> E | None:
    """R6.3 (DAPR): the entry a committed EventRaised `name` deletes: the oldest pending timeout
    timer of a wait on that name (case-insensitive), if it is not due yet (a due one has fired)."""
    folded = name.casefold()
    pending = sorted((e for e in entries if is_timer(e) and e.visible_at > 0
                      and timer_names.get(e.event.timerFired.timerId, "").casefold() == folded),
                     key=lambda e: e.event.timerFired.timerId)
    if pending and pending[0].visible_at > now_ns:
        return pending[0]
    return None


def without_timers(entries: Iterable[E]) -> tuple[list[E], list[E]]:
    """(kept, dropped): an ended or continued generation's timers never fire (R6.2 DAPR, R2.10)."""
    kept, dropped = [], []
    for e in entries:
        (dropped if is_timer(e) else kept).append(e)
    return kept, dropped


def will_be_suspended(entries: Iterable[Entry], *, suspended: bool) -> bool:
    """Suspended once the markers queued in `entries` are committed: the last queued one decides
    (`suspended`: what history says now)."""
    return suspended_after((e.event for e in entries), suspended=suspended)


def next_generation(start: pb.HistoryEvent, carry: Sequence[pb.HistoryEvent],
                    entries: Iterable[E]) -> list[tuple[pb.HistoryEvent, int]]:
    """R2.10 / R3.10: the inbox of a new generation, as (event, visible_at) in order: its
    ExecutionStarted and the carried-over events first, then what arrived meanwhile (not timers)."""
    kept, _ = without_timers(entries)
    return [(start, 0)] + [(ev, 0) for ev in carry] + [(e.event, e.visible_at) for e in kept]


def generation_start(*, previous: pb.HistoryEvent | None, name: str, iid: str, input: str | None,
                     execution_id: str, now_ns: int) -> pb.HistoryEvent:
    """The ExecutionStarted of a continue-as-new generation (it keeps the parent of the first)."""
    start = execution_started(name=name, iid=iid, now_ns=now_ns, input=input, execution_id=execution_id)
    es = start.executionStarted
    if previous is not None and previous.executionStarted.HasField("parentInstance"):
        es.parentInstance.CopyFrom(previous.executionStarted.parentInstance)
    return start
