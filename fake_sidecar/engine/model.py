"""In-memory state of workflow instances, activities, turns and worker streams.

These are the engine's private, mutable records; everything the outside sees
goes through `InstanceView` (frozen).
"""

from __future__ import annotations

import base64
import enum
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Mapping

from taskhub_core.history import TERMINAL, Operation, fresh_opened, start_event
from taskhub_core.timestamps import NEVER_NS, ts, ts_ns  # noqa: F401 - named here for the engine
from taskhub_wire import pb

# NEVER_NS, TERMINAL, ts and ts_ns are taskhub_core's, named here for the engine's modules.


def wire(msg: Any) -> bytes:
    """The bytes of `msg`, map entries in key order. Plain serialisation writes a map in the order of
    its hash table, which differs between a message built by insertion and the same message parsed
    back from the database: the same committed event would change bytes across a restart."""
    return msg.SerializeToString(deterministic=True)


class WorkKind(enum.Enum):
    """What a dispatched work item asks of a worker."""

    TURN = "turn"  # a workflow turn (WorkflowRequest)
    ACTIVITY = "activity"  # one activity run (ActivityRequest)


@dataclass(frozen=True)
class WorkRef:
    """One unit of work of an instance, as queued and as out on a stream."""

    kind: WorkKind
    iid: str
    task_id: int = 0  # the activity's task id; 0 for a turn

    @classmethod
    def turn(cls, iid: str) -> "WorkRef":
        return cls(kind=WorkKind.TURN, iid=iid)

    @classmethod
    def activity(cls, iid: str, task_id: int) -> "WorkRef":
        return cls(kind=WorkKind.ACTIVITY, iid=iid, task_id=task_id)


class CompletionOutcome(enum.Enum):
    """What the engine did with a worker's completion (every one is answered OK on the wire)."""

    APPLIED = "applied"
    STALE = "stale"  # the token is not the current dispatch's: a zombie's answer
    UNKNOWN = "unknown"  # nothing of that instance/task is out
    STALLED = "stalled"
    ABANDONED = "abandoned"  # redelivered later (R3.13)
    VECTOR = "vector"  # the answer to an injected test vector, handed back, not applied


@dataclass(frozen=True)
class ParentRef:
    """The workflow that started a child instance, and the action that did (its task id)."""

    iid: str
    task_id: int
    name: str
    exec_id: str
    app: str = ""  # the parent's app id when the engine hosts several apps (R11.4), else ""

    def meta(self) -> dict[str, Any]:
        """The stored form (the keys of the store's meta value, unchanged since it was a dict)."""
        out: dict[str, Any] = {"iid": self.iid, "task_id": self.task_id, "name": self.name, "exec_id": self.exec_id}
        if self.app:
            out["app"] = self.app
        return out

    @classmethod
    def from_meta(cls, raw: Mapping[str, Any] | None) -> "ParentRef | None":
        """The stored form back; ValueError (naming what is wrong) for a malformed one."""
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise ValueError(f"its parent is {type(raw).__name__}, not an object")
        missing = [k for k in ("iid", "task_id", "name", "exec_id") if k not in raw]
        if missing:
            raise ValueError(f"its parent lacks {', '.join(missing)}")
        return cls(iid=str(raw["iid"]), task_id=int(raw["task_id"]), name=str(raw["name"]),
                   exec_id=str(raw["exec_id"]), app=str(raw.get("app", "")))


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
    # Several apps (R11.2): the app whose workers run it ("" the default app; None: not known yet after a
    # restart, read from its TaskScheduled) and the router its result carries back (R11.3).
    app: str | None = ""
    router: pb.TaskRouter | None = None


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
    parent: ParentRef | None = None
    # The app whose workers run this instance's turns ("" the default app; R11.1) and the history its
    # creator propagated to it (a serialized PropagatedHistory, sent with every turn; R11.8).
    app: str = ""
    incoming: bytes | None = None
    continuing: bool = False  # a continue-as-new generation waits for its first turn: RUNNING, not PENDING
    history: list[pb.HistoryEvent] = field(default_factory=list)
    inbox: list[InboxEntry] = field(default_factory=list)
    activities: dict[int, PendingActivity] = field(default_factory=dict)
    # derived from history (kept incrementally)
    started: bool = False
    completed: pb.HistoryEvent | None = None
    suspended: bool = False
    resolved: set[tuple[str, int]] = field(default_factory=set)
    opened: dict[Operation, set[int]] = field(default_factory=fresh_opened)
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
            "stalled": list(self.stalled) if self.stalled else None,
            "parent": self.parent.meta() if self.parent is not None else None,
            "continuing": self.continuing,
            **({"app": self.app} if self.app else {}),
            **({"incoming": base64.b64encode(self.incoming).decode()} if self.incoming else {}),
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
        return start_event(self.history, self.inbox)


_COLD_FIELDS = tuple(f for f in fields(Instance) if f.name not in HISTORY_FIELDS)


def _fresh_history_fields() -> dict[str, Any]:
    return {"history": [], "started": False, "completed": None, "suspended": False, "resolved": set(),
            "opened": fresh_opened(), "timer_event_names": {},
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
    parent_app: str | None = None  # WorkflowState.parentAppId (R11.4)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass
class Stream:
    sid: int
    stateful: bool
    app: str = ""  # the app whose address the worker connected to ("" the default app; R11.1)
    warm: dict[str, tuple[str, int]] = field(default_factory=dict)  # iid -> (execution id, past events sent)
    out: set[WorkRef] = field(default_factory=set)
