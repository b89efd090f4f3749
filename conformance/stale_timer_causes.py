"""A timeout that fired after its wait was satisfied, read from an instance's history: the root cause of
what the instance then shows.

Engines may deliver a wait's timeout timer after the event it guarded committed (durabletask-go's backend
does, engine-rules R6.3); the wait is already resolved, so the code must go on as if the timer never came.
durabletask-go before dapr/durabletask-go#114 (docs/upstream-bugs.md) cancelled the answered wait instead,
and what the workflow then returned broke whatever ordering or buffering requirement its scenario lists.
The defect is that the answer is not what the code does (RPL-EXEC-001), so what the instance shows is
charged there, with the stale timer named.

Which wait an event answers: waits of one name take events in the order they were made (first come, first
served), and a wait is known by the timer its worker records for it (TimerCreated with an externalEvent
origin, the far-future one included for a wait without a timeout). An event with no such wait open is
buffered and answers none here.

It is the worker's cause only in a scenario that has the engine deliver stale timeouts
(`late_timeout_timers`, conformance/runner/execute.py): elsewhere an engine that delivers one breaks
TMR-TIMEOUT-001 itself, and what follows is charged by the scenario's own rules.

Pure: recorded histories in, causes per instance out (conformance/attribution.py charges them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from taskhub_wire import pb
from taskhub_wire.kinds import EventKind, event_kind

from conformance.attribution import EXECUTES, Cause


def stale_timeouts(histories: Mapping[str, Sequence[pb.HistoryEvent]]) -> dict[str, Cause]:
    """instance id -> the first wait timeout that fired after its event, for each instance whose history shows one."""
    found = {iid: _stale_timeout(events) for iid, events in histories.items()}
    return {iid: cause for iid, cause in found.items() if cause is not None}


def _stale_timeout(events: Sequence[pb.HistoryEvent]) -> Cause | None:
    open_waits: dict[str, list[int]] = {}  # event name -> timer ids of its open waits, oldest first
    answered: dict[int, tuple[str, int, int]] = {}  # timer id -> (name, TimerCreated index, EventRaised index)
    created_at: dict[int, int] = {}
    for index, event in enumerate(events):
        kind = event_kind(event)
        if kind is EventKind.TIMER_CREATED and event.timerCreated.HasField("externalEvent"):
            name = event.timerCreated.externalEvent.name.casefold()
            open_waits.setdefault(name, []).append(event.eventId)
            created_at[event.eventId] = index
        elif kind is EventKind.EVENT_RAISED:
            waits = open_waits.get(event.eventRaised.name.casefold())
            if waits:
                tid = waits.pop(0)
                answered[tid] = (event.eventRaised.name, created_at[tid], index)
        elif kind is EventKind.TIMER_FIRED:
            tid = event.timerFired.timerId
            if tid in answered:
                name, created, raised = answered[tid]
                return Cause(requirement=EXECUTES,
                             text=f"a stale timeout: the timer of the wait for event '{name}' (TimerCreated, history "
                                  f"event {created}) fired (history event {index}) after that event had answered the "
                                  f"wait (history event {raised}); the wait stays answered, so what the workflow did "
                                  "after the timer is not what its code does")
            for waits in open_waits.values():  # a timeout that ends its wait: the wait takes no event after it
                if tid in waits:
                    waits.remove(tid)
    return None


__all__ = ["stale_timeouts"]
