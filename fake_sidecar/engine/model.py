"""In-memory state of workflow instances, activities, turns and worker streams.

These are the engine's private, mutable records; everything the outside sees
goes through `InstanceView` (frozen).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable

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


def wire(msg: Any) -> bytes:
    """The bytes of `msg`, map entries in key order. Plain serialisation writes a map in the order of
    its hash table, which differs between a message built by insertion and the same message parsed
    back from the database: the same committed event would change bytes across a restart."""
    return msg.SerializeToString(deterministic=True)


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


# `history` and what `absorb` derives from it: a cold instance (restored without its history,
# so that a restart reads no history at all) loads them on first use.
HISTORY_FIELDS = frozenset({"history", "started", "completed", "suspended", "resolved", "opened",
                            "timer_event_names", "children", "patches"})


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

    @classmethod
    def restored(cls, *, warm: Callable[["Instance"], None], **given: Any) -> "Instance":
        """An instance without its history fields; the first read of one calls `warm(inst)`, which
        must call `warm_up`. Built straight into __dict__: a restart makes thousands of them."""
        inst = cls.__new__(cls)
        state = inst.__dict__
        for f in _COLD_FIELDS:
            if f.name in given:
                state[f.name] = given[f.name]
            else:
                state[f.name] = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        state["_warm"] = warm
        return inst

    def warm_up(self, *, events: list[pb.HistoryEvent],
                absorb: Callable[["Instance", pb.HistoryEvent], None]) -> None:
        """Fill the history fields of a cold instance from its committed `events`."""
        self.__dict__.pop("_warm", None)
        for name, value in _fresh_history_fields().items():
            self.__dict__[name] = value
        # The stored meta is written with every commit: it already holds what absorbing gives.
        keep = self.stalled, self.continuing
        for ev in events:
            self.history.append(ev)
            absorb(self, ev)
        self.stalled, self.continuing = keep

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that are not set: the history fields of a cold instance.
        warm = self.__dict__.get("_warm")
        if warm is None or name not in HISTORY_FIELDS:
            raise AttributeError(f"'Instance' object has no attribute {name!r}")
        warm(self)  # fills the fields, or raises (a clean store error) leaving the instance cold
        return self.__dict__[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in HISTORY_FIELDS and name not in self.__dict__ and "_warm" in self.__dict__:
            getattr(self, name)  # warm up first, or the other fields would overwrite this one later
        object.__setattr__(self, name, value)

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


_COLD_FIELDS = tuple(f for f in fields(Instance) if f.name not in HISTORY_FIELDS)


def _fresh_history_fields() -> dict[str, Any]:
    return {"history": [], "started": False, "completed": None, "suspended": False, "resolved": set(),
            "opened": {"task": set(), "timer": set(), "child": set()}, "timer_event_names": {},
            "children": [], "patches": []}


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
    warm: dict[str, tuple[str, int]] = field(default_factory=dict)  # iid -> (execution id, past events sent)
    out: set[tuple[str, str, int]] = field(default_factory=set)
