"""A recorded history cut into the turns the engine committed, and the request that replays each.

A turn starts at a WorkflowStarted event (OrchestratorStarted upstream). Its inbox events (what
the engine delivered: ExecutionStarted, TaskCompleted, TimerFired, EventRaised, ...) are followed
by the events the engine made from the worker's answer (TaskScheduled, TimerCreated,
ExecutionCompleted, ...): those are what the code must answer again.

Each turn is replayed with everything up to and including its inbox events as *past* events and
one fresh WorkflowStarted (the turn's own timestamp) as the only new event. So the code runs that
turn as a replay, as it will when it next runs the instance after a deploy: `is_patched` answers
from history, not "true because this is new code", and the actions it answers are exactly the
ones it makes in that turn (everything earlier is matched by past events).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from taskhub_wire import pb
from taskhub_wire.kinds import PRODUCED_FIELDS, EventKind, Source

# Events the engine writes from a worker's action (engine-rules.md §2: eventId = action id).
ACTION_EVENTS = PRODUCED_FIELDS
# Events no turn delivers: written by the engine outside turns, or never by the Dapr engines.
ENGINE_EVENTS = frozenset(k.field for k in EventKind if k.source in (Source.ENGINE, Source.NEVER))


@dataclass(frozen=True, kw_only=True)
class Turn:
    number: int  # 1-based
    start: int  # index of its WorkflowStarted in the history
    end: int  # one past its last event
    inbox: tuple[int, ...]  # indices of the events the engine delivered
    recorded: tuple[int, ...]  # indices of the events made from the worker's answer


def split(events: Sequence[pb.HistoryEvent]) -> list[Turn]:
    starts = [i for i, e in enumerate(events) if e.HasField("workflowStarted")]
    if not starts or starts[0] != 0:
        # Histories always open with a WorkflowStarted; tolerate a missing one by a virtual turn at 0.
        starts = [0] + starts
    turns = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(events)
        inbox, recorded = [], []
        for i in range(start, end):
            kind = events[i].WhichOneof("eventType")
            if kind == EventKind.WORKFLOW_STARTED.field or kind in ENGINE_EVENTS:
                continue
            (recorded if kind in ACTION_EVENTS else inbox).append(i)
        turns.append(Turn(number=n + 1, start=start, end=end, inbox=tuple(inbox), recorded=tuple(recorded)))
    return turns


def request(events: Sequence[pb.HistoryEvent], turn: Turn) -> tuple[list[pb.HistoryEvent], list[pb.HistoryEvent]]:
    """(past, new) that replay `turn`: earlier turns whole, this turn's WorkflowStarted and inbox,
    and a fresh WorkflowStarted with the turn's timestamp."""
    past = list(events[: turn.start])
    if events[turn.start].HasField("workflowStarted"):
        past.append(events[turn.start])
    past.extend(events[i] for i in turn.inbox)
    ws = pb.HistoryEvent(eventId=-1)
    ws.workflowStarted.SetInParent()
    ws.timestamp.CopyFrom(events[turn.start].timestamp)
    return past, [ws]


def whole(events: Sequence[pb.HistoryEvent], *, keep_actions: bool) -> tuple[Turn, list[pb.HistoryEvent],
                                                                               list[pb.HistoryEvent]]:
    """One request for the whole history, for the quick pre-check of `--mode fast`:

    - keep_actions=False: every inbox event as past and no action event, so the code makes every
      action of the whole run and answers all of them (each must be one history recorded);
    - keep_actions=True: the history as the engine would send it on the next turn (without its
      ExecutionCompleted); the SDK checks its own replay and answers only what is new (nothing,
      or the recorded completion).
    The returned Turn spans the history and lists as `recorded` what the answer must hold."""
    past, recorded = [], []
    stop = len(events)
    if not keep_actions:
        # SDKs answer only the completion once the code completes: stop before the completing turn
        # (its completion is checked by the keep_actions=True request).
        done = next((i for i, e in enumerate(events) if e.HasField("executionCompleted")), None)
        if done is not None:
            stop = max((i for i in range(done + 1) if events[i].HasField("workflowStarted")), default=done)
    for i, e in enumerate(events[:stop]):
        kind = e.WhichOneof("eventType")
        if kind in ENGINE_EVENTS:
            continue
        if kind in ACTION_EVENTS and (not keep_actions or kind == EventKind.EXECUTION_COMPLETED.field):
            recorded.append(i)
            continue
        past.append(e)
    last_ws = next((e for e in reversed(events) if e.HasField("workflowStarted")), events[0])
    ws = pb.HistoryEvent(eventId=-1)
    ws.workflowStarted.SetInParent()
    ws.timestamp.CopyFrom(last_ws.timestamp)
    turn = Turn(number=0, start=0, end=stop, inbox=(), recorded=tuple(recorded))
    return turn, past, [ws]
