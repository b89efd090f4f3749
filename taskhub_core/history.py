"""What committed history says: the operations it opens and resolves, its patches and version.

`absorb` is the one rule for what one committed event changes in an instance's derived facts; the
sidecar applies it to its mutable record, `Facts` to a frozen copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, SimpleNamespace
from typing import Any, NamedTuple, Protocol

from taskhub_wire import pb
from taskhub_wire.kinds import OPENING_FIELDS, RESOLVING_FIELDS, EventKind, Operation

from taskhub_core.timestamps import MAX_TIMESTAMP_NS

TERMINAL = frozenset({
    pb.ORCHESTRATION_STATUS_COMPLETED,
    pb.ORCHESTRATION_STATUS_FAILED,
    pb.ORCHESTRATION_STATUS_TERMINATED,
    pb.ORCHESTRATION_STATUS_CANCELED,
})


class ResolutionKey(NamedTuple):
    operation: Operation
    id: int


def resolution_key(ev: pb.HistoryEvent) -> ResolutionKey | None:
    """The operation `ev` resolves, or None (it resolves nothing)."""
    field = ev.WhichOneof("eventType")
    if field not in RESOLVING_FIELDS:
        return None
    kind = EventKind.from_field(field)
    return ResolutionKey(kind.resolves, getattr(getattr(ev, field), kind.ref_field))


def first_version_name(history: Iterable[pb.HistoryEvent]) -> str:
    """The version name the first turn recorded ("" when none)."""
    for ev in history:
        if ev.HasField("workflowStarted"):
            v = ev.workflowStarted.version
            return v.name if ev.workflowStarted.HasField("version") and v.HasField("name") else ""
    return ""


def timeout_event_name(ev: pb.HistoryEvent) -> str | None:
    """The event whose wait a TimerCreated times out (R6.3), or None for a plain timer."""
    origin = ev.timerCreated.WhichOneof("origin")
    if origin == "externalEvent":
        return ev.timerCreated.externalEvent.name
    if origin is None and ev.timerCreated.HasField("name"):
        return ev.timerCreated.name  # SDKs older than the origin field name the timer after the event
    return None


def is_optional_timer(ev: pb.HistoryEvent) -> bool:
    """A TimerCreated of an indefinite wait_for_external_event: fireAt the 9999-12-31 sentinel,
    origin externalEvent or none. dapr's Python SDK (1.19.0, ``_durabletask/worker.py``, the
    ``timerCreated`` branch) drops such an event on replay when the current code has another action
    at its id, so that action comes back at the same id (R3.14 a)."""
    if not ev.HasField("timerCreated"):
        return False
    fire_at = ev.timerCreated.fireAt
    return (fire_at.seconds * 1_000_000_000 + fire_at.nanos == MAX_TIMESTAMP_NS
            and ev.timerCreated.WhichOneof("origin") in (None, "externalEvent"))


def start_event(history: Iterable[pb.HistoryEvent], inbox: Iterable[Any]) -> pb.HistoryEvent | None:
    """A generation's ExecutionStarted: in its history, or still waiting in its inbox (entries with `.event`)."""
    for ev in history:
        if ev.HasField("executionStarted"):
            return ev
    for entry in inbox:
        if entry.event.HasField("executionStarted"):
            return entry.event
    return None


def status_name(value: int) -> str:
    """An OrchestrationStatus without its prefix (COMPLETED, ...), also for an unknown number."""
    try:
        return pb.OrchestrationStatus.Name(value).removeprefix("ORCHESTRATION_STATUS_")
    except ValueError:
        return f"UNKNOWN_STATUS_{value}"


def fresh_opened() -> dict[Operation, set[int]]:
    return {op: set() for op in Operation}


class HistoryRecord(Protocol):
    """The derived facts `absorb` keeps (the sidecar's `Instance` is one)."""

    started: bool
    continuing: bool
    completed: pb.HistoryEvent | None
    suspended: bool
    stalled: tuple[int, str] | None
    opened: dict[Operation, set[int]]
    resolved: set[tuple[str, int]]
    timer_event_names: dict[int, str]
    children: list[str]
    patches: list[str]


def absorb(rec: HistoryRecord, ev: pb.HistoryEvent) -> None:
    """Update the derived facts of `rec` for one committed history event (the caller keeps the
    history itself)."""
    kind = ev.WhichOneof("eventType")
    if kind == EventKind.EXECUTION_STARTED.field:
        rec.started = True
        rec.continuing = False
    elif kind == EventKind.EXECUTION_COMPLETED.field:
        rec.completed = ev
    elif kind == EventKind.EXECUTION_SUSPENDED.field:
        rec.suspended = True
    elif kind == EventKind.EXECUTION_RESUMED.field:
        rec.suspended = False
    elif kind in OPENING_FIELDS:
        rec.opened[EventKind.from_field(kind).opens].add(ev.eventId)
        if kind == EventKind.TIMER_CREATED.field and (name := timeout_event_name(ev)) is not None:
            rec.timer_event_names[ev.eventId] = name
        elif kind == EventKind.CHILD_WORKFLOW_INSTANCE_CREATED.field:
            rec.children.append(ev.childWorkflowInstanceCreated.instanceId)
    elif kind == EventKind.WORKFLOW_STARTED.field and ev.workflowStarted.HasField("version"):
        rec.patches.extend(ev.workflowStarted.version.patches)
    key = resolution_key(ev)
    if key is not None:
        rec.resolved.add(key)
    if kind != EventKind.EXECUTION_STALLED.field:
        rec.stalled = None  # any committed event other than a stall clears it (R1.4)


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What an instance's committed history implies, frozen (see `absorb`)."""

    started: bool = False
    continuing: bool = False  # a continue-as-new generation waits for its first turn
    completed: pb.HistoryEvent | None = None
    suspended: bool = False
    stalled: tuple[int, str] | None = None
    opened: Mapping[Operation, frozenset[int]] = field(
        default_factory=lambda: MappingProxyType({op: frozenset() for op in Operation}))
    resolved: frozenset[tuple[str, int]] = frozenset()
    timer_event_names: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))
    children: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()

    @classmethod
    def of(cls, rec: HistoryRecord) -> "Facts":
        """A frozen copy of a mutable record's facts."""
        return cls(started=rec.started, continuing=rec.continuing, completed=rec.completed,
                   suspended=rec.suspended, stalled=rec.stalled,
                   opened=MappingProxyType({Operation(k): frozenset(v) for k, v in rec.opened.items()}),
                   resolved=frozenset(rec.resolved), timer_event_names=MappingProxyType(dict(rec.timer_event_names)),
                   children=tuple(rec.children), patches=tuple(rec.patches))

    def extended(self, events: Sequence[pb.HistoryEvent]) -> "Facts":
        """The facts after committing `events` (one copy per call, not per event)."""
        if not events:
            return self
        rec = SimpleNamespace(started=self.started, continuing=self.continuing, completed=self.completed,
                              suspended=self.suspended, stalled=self.stalled,
                              opened={k: set(v) for k, v in self.opened.items()}, resolved=set(self.resolved),
                              timer_event_names=dict(self.timer_event_names), children=list(self.children),
                              patches=list(self.patches))
        for ev in events:
            absorb(rec, ev)  # type: ignore[arg-type]  # a HistoryRecord while it folds
        return Facts.of(rec)  # type: ignore[arg-type]

    @property
    def used_ids(self) -> frozenset[int]:
        """Every action id an operation of this generation holds (R3.14)."""
        return frozenset().union(*self.opened.values())

    @property
    def terminal(self) -> bool:
        return self.completed is not None
