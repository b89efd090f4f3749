"""History well-formedness invariants, checked on every history a scenario produces."""

from __future__ import annotations

from typing import Any

from taskhub_wire.kinds import EventKind, Operation

from conformance.checks import Observed, check, fail
from conformance.verdict import Mismatch

K = EventKind


def _instant(text: Any) -> Any:
    """An RFC 3339 timestamp as a comparable value (fractions have varying digits, so text won't sort)."""
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp()
    stamp.FromJsonString(str(text))
    return stamp.seconds * 1_000_000_000 + stamp.nanos


def _ref(event: dict[str, Any]) -> int:
    return int(event.get("timerId", event.get("taskScheduledId", 0)))


def _id_key(kind: EventKind) -> EventKind | None:
    """The id space an action-made event's eventId is unique in (a completion is checked on its own,
    once and last), or None for an event without an action id."""
    return None if kind.made_by is None or kind is K.EXECUTION_COMPLETED else kind


def invariants(history: list[dict[str, Any]]) -> list[str]:
    """Every broken invariant of one committed history (engine-rules.md §2)."""
    out: list[str] = []
    if not history:
        return out
    # A stall before the first committed turn leaves ExecutionStalled events first (§7).
    lead = 0
    while lead < len(history) and history[lead]["kind"] == K.EXECUTION_STALLED:
        lead += 1
    history = history[lead:]
    if not history:
        return out
    kinds = [e["kind"] for e in history]
    if kinds[0] != K.WORKFLOW_STARTED:
        out.append(f"event #0 is {kinds[0]}; every turn, so every history, starts with WorkflowStarted (R2.1)")
    starts = [i for i, k in enumerate(kinds) if k == K.EXECUTION_STARTED]
    if len(starts) > 1:
        out.append(f"ExecutionStarted appears {len(starts)} times (at {starts}); once per generation")
    if K.WORKFLOW_COMPLETED in kinds:
        out.append("a WorkflowCompleted event is in history; the Dapr engines never write it (R2.2)")
    completed = [i for i, k in enumerate(kinds) if k == K.EXECUTION_COMPLETED]
    if len(completed) > 1:
        out.append(f"ExecutionCompleted appears {len(completed)} times; a completion is final")
    elif completed and completed[0] != len(kinds) - 1:
        out.append(f"events follow ExecutionCompleted: {kinds[completed[0] + 1:]}")
    opened: dict[tuple[EventKind, int], dict[str, Any]] = {}
    resolved: dict[tuple[EventKind, int], str] = {}
    last_ws = None
    turn_start = None
    for i, e in enumerate(history):
        kind = EventKind(e["kind"])
        if kind is K.WORKFLOW_STARTED:
            ts = e.get("timestamp")
            if last_ws is not None and ts is not None and _instant(ts) < _instant(last_ws):
                out.append(f"event #{i}: WorkflowStarted time {ts} is earlier than the previous turn's {last_ws}")
            last_ws = ts if ts is not None else last_ws
            turn_start = ts
        if (space := _id_key(kind)) is not None:
            key = (space, e["eventId"])
            if key in opened:
                out.append(f"event #{i}: {kind} reuses eventId {e['eventId']} (R2.4: eventId = action id, unique)")
            opened[key] = e
        elif kind is not K.EXECUTION_COMPLETED and e.get("eventId", -1) != -1:
            out.append(f"event #{i}: {kind} has eventId {e['eventId']}; only action-made events carry ids (R2.4)")
        if kind.resolves is not None:
            key = (kind.resolves.opened_by, _ref(e))
            if key not in opened:
                out.append(f"event #{i}: {kind} for id {key[1]} has no matching {kind.resolves} operation (R2.8)")
            elif key in resolved:
                out.append(f"event #{i}: {kind} resolves id {key[1]} again (first by {resolved[key]}); "
                           "each result is recorded exactly once (R2.7)")
            else:
                resolved[key] = kind
                source = opened[key]
                if kind.resolves is Operation.TASK and e.get("taskExecutionId", "") != \
                        source.get("taskExecutionId", ""):
                    out.append(f"event #{i}: {kind} taskExecutionId {e.get('taskExecutionId')!r} differs from "
                               f"its TaskScheduled's {source.get('taskExecutionId')!r} (R2.5)")
                if kind is K.TIMER_FIRED:
                    if e.get("fireAt") != source.get("fireAt"):
                        out.append(f"event #{i}: TimerFired fireAt {e.get('fireAt')} differs from TimerCreated "
                                   f"{source.get('fireAt')} (R2.5)")
                    if turn_start is not None and e.get("fireAt") and _instant(turn_start) < _instant(e["fireAt"]):
                        out.append(f"event #{i}: timer {key[1]} fired in a turn starting {turn_start}, before its "
                                   f"fireAt {e['fireAt']} (R6.1)")
    return out


# The requirement each invariant belongs to, by the rule its message cites (first match wins).
_BREAKS = (("(R2.4", "HIST-EVENTID-001"), ("(R2.7)", "HIST-ONCE-001"), ("(R2.8)", "HIST-CORR-001"),
           ("taskExecutionId", "ACT-TEID-001"), ("(R2.5)", "HIST-CORR-001"), ("(R6.1)", "TMR-FIRE-001"),
           ("ExecutionCompleted", "LIFE-STATUS-001"))


def _breaks(text: str) -> str:
    return next((rid for marker, rid in _BREAKS if marker in text), "HIST-LAYOUT-001")


@check("history_well_formed", always=True)
def history_well_formed(obs: Observed) -> None:
    """The engine's history invariants; each broken one names the requirement it breaks."""
    out = []
    for iid, history in obs.histories.items():
        out += [Mismatch(text=f"{iid}: {x}", requirement=_breaks(x)) for x in invariants(history)]
    fail(obs, "history_well_formed", out)
