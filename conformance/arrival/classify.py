"""Which (construct, arrival) cells one instance's history reaches, given the program that made it.

Pure: the reference executor replays the history once with its trace on
(`conformance.targets.reference.trace_program`), which says which step made each action id, which
event each wait took and when each step was resolved; turns are the history's WorkflowStarted
boundaries; what opens and resolves what is the kinds table's (taskhub_wire.kinds) and
`taskhub_core.history.resolution_key`. `fresh` names the turns a worker got without having built
what they resolve (after a restart, a broken stream, a redelivery; every vector turn).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from taskhub_core.history import resolution_key
from taskhub_programs import All, AnyOf, Bundle, CallActivity, CallChild, Timer, WaitEvent
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind, Source

from conformance.arrival.cells import IMPOSSIBLE, Arrival, Cell, Construct
from conformance.targets.reference import trace_program


@dataclass(frozen=True, kw_only=True)
class Reached:
    """The cells one history reaches."""

    cells: frozenset[Cell]
    note: str = ""  # why the history could not be fully read (it does not replay on the program)


def turns_of(history: Sequence[pb.HistoryEvent]) -> list[int]:
    """Each event's turn number: turns start at each WorkflowStarted, from 0."""
    turn, out = -1, []
    for ev in history:
        if ev.HasField(EventKind.WORKFLOW_STARTED.field):
            turn += 1
        out.append(max(turn, 0))
    return out


def _constructs(step: object, member: int | None) -> tuple[Construct, ...]:
    if member is not None and isinstance(step, (All, AnyOf)):
        inner = step.tasks[member]
        outer = Construct.ALL if isinstance(step, All) else Construct.ANY
        nested = ((isinstance(inner, WaitEvent) and inner.timeout is not None)
                  or (isinstance(inner, (CallActivity, CallChild)) and inner.retry is not None))
        if nested:
            return outer, Construct.INNER_IN_ALL if outer is Construct.ALL else Construct.INNER_IN_ANY
        return (outer,)
    if isinstance(step, (CallActivity, CallChild)):
        if step.retry is not None:
            return (Construct.RETRY,)
        return (Construct.ACTIVITY if isinstance(step, CallActivity) else Construct.CHILD,)
    if isinstance(step, Timer):
        return (Construct.TIMER,)
    if isinstance(step, WaitEvent):
        return (Construct.EVENT,)
    return ()


def classify(bundle: Bundle, *, instance_id: str, history: Sequence[pb.HistoryEvent],
             fresh: Iterable[int] = ()) -> Reached:
    """The cells `history` (one generation of one instance) reaches on `bundle`'s program."""
    history = list(history)
    if not history:
        return Reached(cells=frozenset())
    fresh = frozenset(fresh)
    turn = turns_of(history)
    pos = {id(ev): i for i, ev in enumerate(history)}
    tr = trace_program(bundle, instance_id=instance_id, history=history)
    cells: set[Cell] = set()

    def turn_at(ev: pb.HistoryEvent | None) -> int:
        return turn[pos[id(ev)]] if ev is not None and id(ev) in pos else 0

    def replayed(built: int, arrived: int) -> bool:
        return any(built < t <= arrived for t in fresh)

    def add(constructs: Iterable[Construct], arrivals: Iterable[Arrival]) -> None:
        for c in constructs:
            for a in arrivals:
                cell = Cell(c, a)
                if cell not in IMPOSSIBLE:
                    cells.add(cell)

    def arrival(*, built: int, at: int, step: object, ev: pb.HistoryEvent) -> list[Arrival]:
        done = tr.done.get(id(step))
        if done is not None and done is not ev and id(done) in pos and pos[id(done)] < pos[id(ev)]:
            found = [Arrival.LATE]  # the construct was resolved before this arrived
        elif at < built:
            found = [Arrival.BEFORE]
        elif at == built:
            found = [Arrival.SAME_TURN]
        else:
            found = [Arrival.LATER_TURN]
        if replayed(built, at):
            found.append(Arrival.REPLAY)
        return found

    # Operations the answers opened (activities, children, timers, retry timers, wait timers).
    resolutions: dict[tuple, list[pb.HistoryEvent]] = {}
    for ev in history:
        key = resolution_key(ev)
        if key is not None:
            resolutions.setdefault(tuple(key), []).append(ev)
    for ev in history:
        kind = EventKind.of(ev)
        if kind.opens is None:
            continue
        step, member, _at = tr.opened.get(ev.eventId, (None, None, None))
        constructs = _constructs(step, member)
        if not constructs:
            continue
        built = turn_at(ev)
        guard = ev.timerCreated.WhichOneof("origin") if kind is EventKind.TIMER_CREATED else None
        for k, res in enumerate(resolutions.get((kind.opens, ev.eventId), ())):
            if pos[id(res)] < pos[id(ev)]:
                continue  # a result before its call is no arrival at this construct
            if k:
                add(constructs, [Arrival.DUPLICATE])
            elif guard in _GUARDS and _outlived(tr, step, member, guard, res, pos):
                add([c for c in constructs if c not in (Construct.ALL, Construct.ANY)], [Arrival.LATE_TIMER])
            else:
                add(constructs, arrival(built=built, at=turn_at(res), step=step, ev=res))

    # Event waits: the EventRaised each took (buffered before it was built, or delivered to it).
    for w in tr.waits:
        constructs = _constructs(w.step, w.member)
        if w.by is not None and constructs:
            add(constructs, arrival(built=turn_at(w.built), at=turn_at(w.by), step=w.step, ev=w.by))
    # An event for a wait that had already timed out stays buffered: a late arrival at that wait.
    for w in tr.waits:
        if w.by is not None or not isinstance(w.step, (WaitEvent, All, AnyOf)):
            continue
        name = (w.step if isinstance(w.step, WaitEvent) else w.step.tasks[w.member]).name.casefold()
        done = tr.done.get(id(w.step))
        for ev in tr.buffer.get(name, ()):
            if done is not None and id(done) in pos and pos[id(done)] < pos[id(ev)]:
                add(_constructs(w.step, w.member), [Arrival.LATE])

    # continue-as-new with carry_events: the events it carried.
    if tr.carried is not None:
        at, carried = tr.carried
        names = [ev.eventRaised.name.casefold() for ev in carried]
        for ev in carried:
            found = [Arrival.BEFORE if turn_at(ev) < turn_at(at) else Arrival.SAME_TURN]
            if replayed(turn_at(ev), turn_at(at)):
                found.append(Arrival.REPLAY)
            add([Construct.CARRY], found)
        if len(set(names)) < len(names):
            add([Construct.CARRY], [Arrival.DUPLICATE])

    cells |= _suspension_cells(history, turn, fresh)
    return Reached(cells=frozenset(cells), note=tr.error or "")


_GUARDS = ("externalEvent", "activityRetry", "childWorkflowRetry")  # TimerCreated origins of guard timers


def _outlived(tr: object, step: object, member: int | None, guard: str, fired: pb.HistoryEvent,
              pos: dict[int, int]) -> bool:
    """A timeout timer fired after its wait took its event, or a retry timer after its call was
    resolved: the late TimerFired the reference engine never delivers (R6.3)."""
    before = lambda ev: ev is not None and id(ev) in pos and pos[id(ev)] < pos[id(fired)]  # noqa: E731
    if guard == "externalEvent":
        return any(w.step is step and w.member == member and before(w.by) for w in tr.waits)
    return before(tr.done.get(id(step)))


def _suspension_cells(history: Sequence[pb.HistoryEvent], turn: Sequence[int], fresh: frozenset[int]) -> set[Cell]:
    cells: set[Cell] = set()
    suspended_at: int | None = None  # the turn of the suspension in effect
    for i, ev in enumerate(history):
        kind = EventKind.of(ev)
        if kind is EventKind.EXECUTION_SUSPENDED:
            if suspended_at is not None:
                cells.add(Cell(Construct.SUSPEND, Arrival.DUPLICATE))
                continue
            suspended_at = turn[i]
            if any(turn[j] == turn[i] and _arrives(history[j]) for j in range(i)):
                cells.add(Cell(Construct.SUSPEND, Arrival.BEFORE))
        elif kind is EventKind.EXECUTION_RESUMED:
            if suspended_at is None:
                cells.add(Cell(Construct.SUSPEND, Arrival.LATE))
                continue
            if any(suspended_at < t <= turn[i] for t in fresh):
                cells.add(Cell(Construct.SUSPEND, Arrival.REPLAY))
            suspended_at = None
        elif suspended_at is not None and _arrives(ev):
            cells.add(Cell(Construct.SUSPEND, Arrival.SAME_TURN if turn[i] == suspended_at else Arrival.LATER_TURN))
    return cells


def _arrives(ev: pb.HistoryEvent) -> bool:
    """A delivered result, timer or event (what a suspension holds back)."""
    kind = EventKind.of(ev)
    return kind.source is Source.INBOX and (kind.resolves is not None or kind is EventKind.EVENT_RAISED)
