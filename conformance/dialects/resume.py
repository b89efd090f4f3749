"""Held events on resume: a history laid out by a worker that runs its code between them.

EVT-SUSP-001 asks a worker to act on the events held while suspended after ExecutionResumed; it does
not say whether the code runs between them. The reference (and the Python and JS SDKs) delivers them
one at a time, so a wait reached after the first of them finds no event yet and makes its wait timer
(an externalEvent TimerCreated), and the next held event then answers it. durabletask-go and
durabletask-java (capability `resume_releases_at_once`) apply every held event before the code runs
again (durabletask-go v0.14.0 task/orchestrator.go:1042-1049, v0.12.1 :886-894; durabletask-java
TaskOrchestrationExecutor.handleExecutionResumed): the same wait finds its event in the buffer and
makes no timer. A past holding such a timer is one no engine writes for those workers: their replay
meets a recorded timer their code does not make (nondeterminism), whatever they do right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from taskhub_wire import pb
from taskhub_wire.kinds import EventKind, event_kind

AT_ONCE = "resume_releases_at_once"


def waits_between_released(past: Iterable[pb.HistoryEvent]) -> tuple[str, ...]:
    """Event names (case-folded, as both SDKs match names) for which a turn that resumed the instance
    recorded a wait timer although more events of that name were released than waits on it were still
    pending from earlier turns: a worker releasing held events at once would have found one buffered.

    Pending waits are over-counted (every wait timer of an earlier turn that has not fired, even if an
    event answered its wait), so the rule errs towards judging the history as the worker's own."""
    suspended = False
    held: Counter[str] = Counter()
    released: Counter[str] = Counter()  # of the current turn's resume
    made: Counter[str] = Counter()  # wait timers the resuming turn recorded
    waiting: Counter[str] = Counter()  # wait timers of earlier turns not fired: waits possibly pending
    waiting_ids: dict[int, str] = {}
    pending_at_resume: Counter[str] = Counter()
    found: set[str] = set()

    def close_turn() -> None:
        found.update(name for name in made if released[name] > pending_at_resume[name])
        waiting.update(made)
        released.clear()
        made.clear()

    for ev in past:
        kind = event_kind(ev)
        if kind is EventKind.WORKFLOW_STARTED:
            close_turn()
        elif kind is EventKind.EXECUTION_SUSPENDED:
            suspended = True
        elif kind is EventKind.EXECUTION_RESUMED and suspended:
            suspended = False
            released.update(held)
            pending_at_resume = Counter(waiting)
            held.clear()
        elif kind is EventKind.EVENT_RAISED and suspended:
            held[ev.eventRaised.name.casefold()] += 1
        elif kind is EventKind.TIMER_FIRED and ev.timerFired.timerId in waiting_ids:
            waiting[waiting_ids.pop(ev.timerFired.timerId)] -= 1
        elif kind is EventKind.TIMER_CREATED and ev.timerCreated.HasField("externalEvent"):
            name = ev.timerCreated.externalEvent.name.casefold()
            waiting_ids[ev.eventId] = name
            if released:
                made[name] += 1
            else:
                waiting[name] += 1
    close_turn()
    return tuple(sorted(found))


__all__ = ["AT_ONCE", "waits_between_released"]
