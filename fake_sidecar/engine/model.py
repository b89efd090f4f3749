"""In-memory state of workflow instances, activities, turns and worker streams.

These are the engine's private, mutable records; everything the outside sees
goes through `InstanceView` (frozen).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from taskhub_wire import pb

# A timer due later than this (about year 2116) never fires: the dx SDK's
# indefinite wait schedules one at 9999-12-31, which must be kept but never fired.
NEVER_NS = 2**62

TERMINAL = frozenset({
    pb.ORCHESTRATION_STATUS_COMPLETED,
    pb.ORCHESTRATION_STATUS_FAILED,
    pb.ORCHESTRATION_STATUS_TERMINATED,
    pb.ORCHESTRATION_STATUS_CANCELED,
})


def ts(ns: int) -> Any:
    """A protobuf Timestamp for integer nanoseconds."""
    out = Timestamp()
    out.seconds, out.nanos = divmod(ns, 1_000_000_000)
    return out


def ts_ns(stamp: Any) -> int:
    return stamp.seconds * 1_000_000_000 + stamp.nanos


@dataclass
class InboxEntry:
    seq: int
    visible_at: int
    gen: int
    event: pb.HistoryEvent


@dataclass
class PendingActivity:
    task_id: int
    gen: int
    request: pb.ActivityRequest
    token: str | None = None
    stream: int | None = None
    dispatched_at: int | None = None
    queued: bool = False
    dispatches: int = 0


@dataclass
class Turn:
    token: str
    stream: int
    new_events: list[pb.HistoryEvent]
    consumed: list[int]  # inbox seqs delivered (or deduplicated) in this turn
    past_len: int


@dataclass
class Instance:
    iid: str
    seq: int
    name: str
    generation: int
    execution_id: str
    created_ns: int
    last_updated_ns: int
    custom_status: str | None = None
    stalled: tuple[int, str] | None = None
    parent: dict[str, Any] | None = None
    continuing: bool = False  # a continue-as-new generation waits for its first turn: RUNNING, not PENDING
    history: list[pb.HistoryEvent] = field(default_factory=list)
    inbox: list[InboxEntry] = field(default_factory=list)
    activities: dict[int, PendingActivity] = field(default_factory=dict)
    # derived from history (kept incrementally)
    started: bool = False
    completed: pb.HistoryEvent | None = None
    suspended: bool = False
    resolved: set[tuple[str, int]] = field(default_factory=set)
    opened: dict[str, set[int]] = field(default_factory=lambda: {"task": set(), "timer": set(), "child": set()})
    timer_event_names: dict[int, str] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)
    # volatile dispatch state
    turn: Turn | None = None
    queued: bool = False
    parked: bool = False
    retries: int = 0
    retry_at: int = 0

    def meta(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "name": self.name, "generation": self.generation,
            "execution_id": self.execution_id, "created_ns": self.created_ns,
            "last_updated_ns": self.last_updated_ns, "custom_status": self.custom_status,
            "stalled": list(self.stalled) if self.stalled else None, "parent": self.parent,
            "continuing": self.continuing,
        }

    @property
    def status(self) -> int:
        """R1.4: completion wins, then stall, then the last suspend/resume marker."""
        if self.completed is not None:
            return self.completed.executionCompleted.workflowStatus
        if self.stalled is not None:
            return pb.ORCHESTRATION_STATUS_STALLED
        if not self.started:
            return pb.ORCHESTRATION_STATUS_RUNNING if self.continuing else pb.ORCHESTRATION_STATUS_PENDING
        if self.suspended:
            return pb.ORCHESTRATION_STATUS_SUSPENDED
        return pb.ORCHESTRATION_STATUS_RUNNING

    @property
    def terminal(self) -> bool:
        return self.completed is not None

    def start_event(self) -> pb.HistoryEvent | None:
        for ev in self.history:
            if ev.HasField("executionStarted"):
                return ev
        for entry in self.inbox:
            if entry.event.HasField("executionStarted"):
                return entry.event
        return None


@dataclass(frozen=True)
class InstanceView:
    """What GetInstance reports, copied out under the engine lock."""

    iid: str
    name: str
    status: int
    created_ns: int
    last_updated_ns: int
    started_ns: int | None
    version: str | None
    input: str | None
    output: str | None
    custom_status: str | None
    failure: pb.TaskFailureDetails | None
    parent_iid: str | None
    execution_id: str
    stalled: tuple[int, str] | None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass
class Stream:
    sid: int
    stateful: bool
    warm: dict[str, int] = field(default_factory=dict)
    out: set[tuple[str, str, int]] = field(default_factory=set)
