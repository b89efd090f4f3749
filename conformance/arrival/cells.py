"""The named coverage targets: each construct that waits on something x each arrival of the awaited
thing relative to it. A cell no history can reach says why (`IMPOSSIBLE`); a cell only engines that
deliver late events reach says so (`LATE_ENGINE`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType


class Construct(enum.StrEnum):
    """A program construct that waits (docs/programs.md), by the step that makes it."""

    ACTIVITY = "activity"  # call_activity without retry, a step of its own
    CHILD = "child"  # call_child without retry
    TIMER = "timer"
    EVENT = "event"  # wait_event, with or without timeout
    RETRY = "retry"  # call_activity / call_child with a retry policy: attempts and retry timers
    ALL = "all"  # the members of an all
    ANY = "any"  # the members of an any
    # The program language has no all/any inside all/any; the composites it nests are a timed
    # wait_event (its event or its timeout timer) and a retried call (attempts, retry timers), as
    # members of an all/any: the inner composite resolves inside the outer one.
    INNER_IN_ALL = "inner in all"
    INNER_IN_ANY = "inner in any"
    CARRY = "continue-as-new carry"  # continue_as_new {carry_events: true}: the events it carries
    SUSPEND = "suspend"  # a suspension: what is delivered around and during it


class Arrival(enum.StrEnum):
    """When the awaited thing arrives, relative to the construct."""

    BEFORE = "before"  # already in history (committed in an earlier turn) when the construct is built
    SAME_TURN = "same turn"  # delivered in the turn that builds the construct
    LATER_TURN = "later turn"  # delivered in a later turn, while the construct waits
    LATE = "late"  # after the construct was resolved by something else (a winner, a timeout, a failure)
    LATE_TIMER = "late timer"  # a timeout or retry timer fires after what it guarded was resolved
    DUPLICATE = "duplicate"  # a second resolution of what was already resolved
    REPLAY = "replay"  # delivered to a worker that did not build the construct (restarted, redelivered)


@dataclass(frozen=True, order=True)
class Cell:
    construct: Construct
    arrival: Arrival

    def __str__(self) -> str:
        return f"{self.construct.value} x {self.arrival.value}"


_RESULT_AFTER_ANSWER = "its result can only follow the answer that makes the call, in a later turn"
_ONE_RESOLVER = "only its own result resolves it, so nothing comes after that but a duplicate"
_C, _A = Construct, Arrival

_NO_GUARD = "no timeout or retry timer guards it (a timer member firing after its any was decided is late)"

IMPOSSIBLE = MappingProxyType({
    **{Cell(c, _A.LATE_TIMER): _NO_GUARD for c in (_C.ACTIVITY, _C.CHILD, _C.TIMER, _C.ALL, _C.ANY, _C.CARRY,
                                                  _C.SUSPEND)},
    **{Cell(c, a): _RESULT_AFTER_ANSWER for c in (_C.ACTIVITY, _C.CHILD, _C.TIMER, _C.RETRY)
       for a in (_A.BEFORE, _A.SAME_TURN)},
    **{Cell(c, _A.LATE): _ONE_RESOLVER for c in (_C.ACTIVITY, _C.CHILD, _C.TIMER)},
    Cell(_C.RETRY, _A.LATE): "only its attempts resolve it (a late attempt result is a duplicate, a late retry "
                             "timer a late timer)",
    # No engine delivers it: a retry timer is made only after an attempt failed and the next attempt
    # only when it fires (durabletask-go v0.14.0 task/orchestrator.go:556-564, :504-512 at daprd
    # v1.18.2's pin 79042da; the Python SDKs' worker.py the same), so the call waits on its timer
    # until it fires; a second TimerFired is a duplicate both engines drop (R2.7).
    Cell(_C.RETRY, _A.LATE_TIMER): "a retried call waits on its retry timer until it fires, and only the next "
                                   "attempt resolves it (durabletask-go v0.14.0 task/orchestrator.go:556-564); a "
                                   "second TimerFired is a duplicate engines drop (runtimestate.go:81-89, daprd "
                                   "v1.18.2 orchestrator/add.go:69); a retry timer outliving its call is one of "
                                   "an all/any member (inner in all/any x late timer)",
    Cell(_C.CARRY, _A.LATER_TURN): "an event raised after the continue-as-new is an arrival of the next "
                                   "generation, with no carry involved",
    Cell(_C.CARRY, _A.LATE): "a carried event waits in the next generation like any other; nothing resolves "
                             "the carry itself",
})

# The late timers: the reference engine deletes a timeout timer pending when its event commits
# (R6.3; only a timer made in the event's own turn survives and fires late) unless the engine
# setting late_timeout_timers asks it to deliver them as durabletask-go's backend does
# (`generate.LATE_OPTION`, `generate.late_recipes`). A retry timer no engine deletes (daprd
# orchestrator/timer.go:75 eventTimerName): a retried member's timer fires late after its all/any
# was decided on every engine, the reference included (engine-rules R6.11).
LATE_ENGINE = frozenset(Cell(c, _A.LATE_TIMER) for c in (_C.EVENT, _C.INNER_IN_ALL, _C.INNER_IN_ANY))

ALL_CELLS = tuple(Cell(c, a) for c in Construct for a in Arrival)
TARGETS = tuple(c for c in ALL_CELLS if c not in IMPOSSIBLE)
