"""One workflow instance as a state machine: `apply(state, command) -> (state, effects)`.

The state is frozen (`InstanceState`); a command is something that happens to the instance (an
event arrives, a worker answers a turn); the effects say, in order, what changed and what the
shell must do about it (dispatch an activity, start a child, deliver a message, tell a parent).
The sidecar engine keeps its lock, store, dispatcher and clock around it; the simulator and the
fuzzer keep the state itself and schedule turns their own way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Union

from taskhub_wire import pb

from taskhub_core.actions import ChildStart
from taskhub_core.history import Facts
from taskhub_core.inbox import generation_start, next_generation, timeout_to_cancel, timer_due_ns, without_timers
from taskhub_core.patches import Stall
from taskhub_core.state import InboxItem, InstanceState
from taskhub_core.turn import ContinueAsNew, Decision, TurnKind, decide_turn

# ----------------------------------------------------------------------------- commands


@dataclass(frozen=True, kw_only=True)
class Arrive:
    """An event reaches the inbox (a raised event, a result, a suspend ...), takeable from `visible_at`."""

    event: pb.HistoryEvent
    visible_at: int = 0


@dataclass(frozen=True, kw_only=True)
class Commit:
    """Commit a decision on the turn that delivered the inbox items `consumed`.

    now_ns: the clock at commit (R6.3: a timeout timer due by then has fired, it is not cancelled);
    restart_ns / next_execution_id: when a continued generation starts, and its execution id;
    cancel_timeouts: R6.3 as daprd >= 1.18.1 applies it; False keeps a wait's timeout timer after its
    event won, so its TimerFired arrives late, as durabletask-go's sidecar and daprd < 1.17.2 deliver it.
    """

    decision: Decision
    consumed: frozenset[int]
    now_ns: int
    restart_ns: int | None = None
    next_execution_id: str = ""
    cancel_timeouts: bool = True


@dataclass(frozen=True, kw_only=True)
class Answer:
    """A worker's answer to the turn that delivered `new_events` (the inbox items `consumed`):
    decided by `turn.decide_turn` at `decided_ns`, then committed as `Commit` does."""

    new_events: tuple[pb.HistoryEvent, ...]
    response: pb.WorkflowResponse
    consumed: frozenset[int]
    decided_ns: int
    now_ns: int
    restart_ns: int | None = None
    next_execution_id: str = ""
    cancel_timeouts: bool = True
    new_id: Callable[[], str] = field(default=lambda: uuid.uuid4().hex, compare=False)


Command = Union[Arrive, Commit, Answer]

# ----------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class Queued:
    item: InboxItem


@dataclass(frozen=True)
class Abandoned:
    """R3.13 / R3.14: the turn is redelivered later; nothing changed."""

    reason: str


@dataclass(frozen=True)
class Stalled:
    stall: Stall


@dataclass(frozen=True)
class Consumed:
    items: tuple[InboxItem, ...]


@dataclass(frozen=True)
class Recorded:
    events: tuple[pb.HistoryEvent, ...]
    custom_status: str | None


@dataclass(frozen=True)
class TimerCancelled:
    item: InboxItem


@dataclass(frozen=True)
class ActivityScheduled:
    request: pb.ActivityRequest


@dataclass(frozen=True)
class TimerScheduled:
    item: InboxItem


@dataclass(frozen=True)
class ChildStarted:
    child: ChildStart


@dataclass(frozen=True)
class MessageSent:
    target: str
    event: pb.HistoryEvent


@dataclass(frozen=True)
class GenerationStarted:
    """Continue-as-new: history is cleared; the new inbox is `inbox` (start, carry-over, the rest)."""

    start: pb.HistoryEvent
    carry: tuple[pb.HistoryEvent, ...]
    inbox: tuple[InboxItem, ...]
    dropped: tuple[InboxItem, ...]  # the old generation's timers


@dataclass(frozen=True)
class Finished:
    """The instance ended: its timers never fire; the shell drops its activities, except those the
    ending turn scheduled (`kept`, R4.1: both engines still dispatch them), and tells its parent."""

    completed: pb.HistoryEvent
    dropped: tuple[InboxItem, ...]
    kept: tuple[int, ...] = ()  # task ids of the ending turn's own activities


@dataclass(frozen=True)
class Cascaded:
    """A recursive termination: the shell terminates the running children with `output`."""

    output: str | None


Effect = Union[Queued, Abandoned, Stalled, Consumed, Recorded, TimerCancelled, ActivityScheduled, TimerScheduled,
               ChildStarted, MessageSent, GenerationStarted, Finished, Cascaded]


def apply(state: InstanceState, command: Command) -> tuple[InstanceState, tuple[Effect, ...]]:
    """The instance after `command`, and what changed, in the order a shell must carry it out."""
    if isinstance(command, Arrive):
        item = InboxItem(seq=state.next_seq, visible_at=command.visible_at, event=command.event)
        return replace(state, inbox=state.inbox + (item,), next_seq=state.next_seq + 1), (Queued(item),)
    if isinstance(command, Answer):
        decision = decide_turn(state, command.new_events, command.response, now_ns=command.decided_ns,
                               new_id=command.new_id)
        command = Commit(decision=decision, consumed=command.consumed, now_ns=command.now_ns,
                         restart_ns=command.restart_ns, next_execution_id=command.next_execution_id,
                         cancel_timeouts=command.cancel_timeouts)
    if isinstance(command, Commit):
        return commit(state, command)
    raise TypeError(f"apply: {type(command).__name__} is not a command of the instance machine")


def commit(state: InstanceState, cmd: Commit) -> tuple[InstanceState, tuple[Effect, ...]]:
    """A decision applied: the consumed inbox items go, the turn's events are recorded, a raised
    event cancels its wait's timeout (R6.3), the turn's operations are handed out, and the
    generation continues as new (R2.10) or ends (R6.2)."""
    d = cmd.decision
    if d.kind is TurnKind.ABANDON:
        return state, (Abandoned(d.reason),)
    if d.kind is TurnKind.STALL:
        assert d.stall is not None
        return replace(state, facts=replace(state.facts, stalled=d.stall)), (Stalled(d.stall),)
    consumed = tuple(e for e in state.inbox if e.seq in cmd.consumed)
    inbox = [e for e in state.inbox if e.seq not in cmd.consumed]
    facts = state.facts.extended(d.events)
    effects: list[Effect] = [Consumed(consumed), Recorded(d.events, d.custom_status)]
    for name in d.cancel_event_timers if cmd.cancel_timeouts else ():
        gone = timeout_to_cancel(inbox, name=name, timer_names=facts.timer_event_names, now_ns=cmd.now_ns)
        if gone is not None:
            inbox.remove(gone)
            effects.append(TimerCancelled(gone))
    effects += [ActivityScheduled(req) for req in d.activities]
    seq = state.next_seq
    for _timer_id, fired in d.timers:
        item = InboxItem(seq=seq, visible_at=timer_due_ns(fired), event=fired)
        seq += 1
        inbox.append(item)
        effects.append(TimerScheduled(item))
    effects += [ChildStarted(child) for child in d.children]
    effects += [MessageSent(target, ev) for target, ev in d.sends]
    out = replace(state, history=state.history + d.events, facts=facts, inbox=tuple(inbox),
                  custom_status=d.custom_status, next_seq=seq)
    if d.continue_as_new is not None:
        out, started = _continue_as_new(out, d.continue_as_new, cmd, previous=out.start_event())
        effects.append(started)
    elif facts.completed is not None:
        kept, dropped = without_timers(out.inbox)
        out = replace(out, inbox=tuple(kept))
        effects.append(Finished(facts.completed, tuple(dropped), kept=tuple(req.taskId for req in d.activities)))
    if d.terminate_cascade is not None and d.terminate_cascade.recurse:
        effects.append(Cascaded(d.terminate_cascade.output))
    return out, tuple(effects)


def _continue_as_new(state: InstanceState, can: ContinueAsNew, cmd: Commit, *,
                     previous: pb.HistoryEvent | None) -> tuple[InstanceState, GenerationStarted]:
    start = generation_start(previous=previous, name=state.name, iid=state.iid, input=can.input,
                             execution_id=cmd.next_execution_id,
                             now_ns=cmd.now_ns if cmd.restart_ns is None else cmd.restart_ns)
    _, dropped = without_timers(state.inbox)
    order = next_generation(start, can.carry, state.inbox)
    items = tuple(InboxItem(seq=state.next_seq + i, visible_at=vis, event=ev) for i, (ev, vis) in enumerate(order))
    out = InstanceState(iid=state.iid, name=state.name, execution_id=cmd.next_execution_id,
                        generation=state.generation + 1, facts=Facts(continuing=True), inbox=items,
                        custom_status=state.custom_status, next_seq=state.next_seq + len(items))
    return out, GenerationStarted(start=start, carry=can.carry, inbox=items, dropped=tuple(dropped))


def start_state(*, iid: str, name: str, start: pb.HistoryEvent, execution_id: str = "",
                visible_at: int = 0) -> InstanceState:
    """A new instance whose inbox holds its ExecutionStarted."""
    state = InstanceState(iid=iid, name=name, execution_id=execution_id)
    return apply(state, Arrive(event=start, visible_at=visible_at))[0]
