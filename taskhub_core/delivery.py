"""What a turn delivers: the one rule for the new events a worker is sent (engine-rules.md R2.1, R2.6, R2.7).

The sidecar's dispatcher, the fuzzer's interleaver and the worker's simulator each keep an inbox
and decide when a turn runs; which of the inbox's entries that turn delivers, in which order, with
which timestamps, is decided here only:

- order: WorkflowStarted (stamped with the turn's time) first, then every entry visible at the
  turn (`visible_at <= now`) in inbox order (arrival order, `seq`); a scheduler may take fewer
  (`limit`: entries queued as visible at once, a generation's start and carried events, are
  always taken);
- deduplication (R2.7): a resolution of an operation already resolved in history, or earlier in
  the same turn, is consumed and neither delivered nor recorded;
- a second ExecutionStarted (an instance started again while one is queued or running) is
  consumed and not delivered;
- timestamps: each event keeps the time it arrived with; a TimerFired (queued without one) is
  stamped when it fires, i.e. when the turn that delivers it is made, before the turn's
  WorkflowStarted (R2.6, DAPR: the firing time; strictly increasing with the scheduler's clock);
- suspension: whether the instance is suspended once the turn's markers are committed (the last
  marker decides), and whether a delivered ExecutionTerminated ends it whatever the answer (R3.16).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from taskhub_wire import pb

from taskhub_core.history import ResolutionKey, resolution_key
from taskhub_core.timestamps import copy_event, ts


class Queued(Protocol):
    """An inbox entry: the sidecar's `InboxEntry`, the core's `InboxItem`."""

    @property
    def seq(self) -> int: ...

    @property
    def visible_at(self) -> int: ...

    @property
    def event(self) -> pb.HistoryEvent: ...


Q = TypeVar("Q", bound=Queued)
# (key, keys seen earlier in this turn) -> whether the resolution is a duplicate (the engine's
# mutants replace the rule through their policy).
DuplicateRule = Callable[[ResolutionKey, set[ResolutionKey]], bool]


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """A turn's new events and what its scheduler does with its inbox."""

    new_events: tuple[pb.HistoryEvent, ...]  # WorkflowStarted first
    consumed: tuple[int, ...]  # seq of every entry the turn takes, delivered or dropped
    duplicates: int = 0  # resolutions dropped (R2.7)
    terminated: bool = False  # R3.16: it delivers ExecutionTerminated, so the instance ends whatever the answer
    suspended: bool = False  # the instance is suspended once the turn commits


def visible(entries: Iterable[Q], *, now_ns: int, limit: int | None = None) -> list[Q]:
    """The entries a turn at `now_ns` takes, in inbox order (at most `limit` besides the ones
    visible at once)."""
    taken = [e for e in entries if e.visible_at <= now_ns]
    if limit is None:
        return taken
    head = [e for e in taken if e.visible_at == 0]
    rest = [e for e in taken if e.visible_at != 0][:limit]
    keep = {id(e) for e in head + rest}
    return [e for e in taken if id(e) in keep]


def stamped(ev: pb.HistoryEvent, clock: Callable[[], int]) -> pb.HistoryEvent:
    """The event as delivered: a TimerFired without a time gets the time it fires (R2.6, DAPR: the
    firing time, which is the delivering turn's); every other event keeps the time it arrived with."""
    if not ev.HasField("timerFired") or ev.HasField("timestamp"):
        return ev
    out = copy_event(ev)
    out.timestamp.CopyFrom(ts(clock()))
    return out


def suspended_after(events: Iterable[pb.HistoryEvent], *, suspended: bool) -> bool:
    """Suspended once `events` are committed (`suspended`: before them): the last marker decides."""
    for ev in events:
        if ev.HasField("executionSuspended"):
            suspended = True
        elif ev.HasField("executionResumed"):
            suspended = False
    return suspended


def terminates(events: Iterable[pb.HistoryEvent]) -> bool:
    """R3.16: a turn delivering ExecutionTerminated ends the instance whatever its answer."""
    return any(ev.HasField("executionTerminated") for ev in events)


def deliver(entries: Sequence[Queued], *, now_ns: int, started: bool, resolved: Collection[ResolutionKey],
            clock: Callable[[], int] | None = None, suspended: bool = False, limit: int | None = None,
            is_duplicate: DuplicateRule | None = None) -> Delivery:
    """The turn a scheduler runs at `now_ns` on `entries` (its instance's inbox, in order).

    `started`: history holds the generation's ExecutionStarted; `resolved`: the operations history
    has resolved; `suspended`: history leaves the instance suspended; `clock`: the time of each stamp
    the turn makes, in order (the timers it fires, then its WorkflowStarted; default `now_ns`: the
    sidecar passes its strictly increasing clock)."""
    duplicate = is_duplicate or (lambda key, seen: key in resolved or key in seen)
    now = clock or (lambda: now_ns)
    new: list[pb.HistoryEvent] = []
    consumed: list[int] = []
    seen: set[ResolutionKey] = set()
    dropped = 0
    have_start = started
    for entry in visible(entries, now_ns=now_ns, limit=limit):
        ev = entry.event
        consumed.append(entry.seq)
        key = resolution_key(ev)
        if key is not None:
            if duplicate(key, seen):
                dropped += 1
                continue
            seen.add(key)
        if ev.HasField("executionStarted"):
            if have_start:
                continue
            have_start = True
        new.append(stamped(ev, now))
    ws = pb.HistoryEvent(eventId=-1, timestamp=ts(now()))
    ws.workflowStarted.SetInParent()
    return Delivery(new_events=(ws, *new), consumed=tuple(consumed), duplicates=dropped, terminated=terminates(new),
                    suspended=suspended_after(new, suspended=suspended))
