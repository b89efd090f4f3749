"""Run a program to its end with only the pure executor, the way an engine drives a worker.

`simulate` plays both sides of the protocol in memory: it builds each turn
(WorkflowStarted first, then the inbox events that are due), asks `execute`
for the answer, commits the turn to history the way the Dapr engine does
(the turn's new events, with the reported version written into its
WorkflowStarted, then one event per action with eventId = action id), and
turns the actions into later inbox events: activity results, fired timers,
child completions. It is deterministic: a fixed start time, a fixed step
between turns, built-in activities run without side effects, no threads.

Clock: the first turn runs at `start_ns`; each later turn runs at
max(previous turn + `step_ns`, the earliest due inbox event) and takes every
event due by then (at most `max_batch`). Activity results are due one step
after the turn that scheduled them (`sleep` adds its seconds), a timer at its
fireAt (the far-future optional timer of an indefinite wait never fires), a
child's completion one step after the child's own last turn (children are
simulated the same way, recursively), an `External` at start + `at` seconds.

Engine rules mirrored (engine-rules.md, reference choices): a committed
EventRaised cancels the oldest pending timeout timer of a wait on that name
(R6.3); a completion action ends the run (pending timers are dropped);
continue-as-new starts a new generation with an empty history whose first
turn carries ExecutionStarted and the carryover events; a
workflowVersionNotAvailable action ends the run (the engine would stall).
Patch-mismatch stalls are not modelled: one bundle never disagrees with itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from google.protobuf.timestamp_pb2 import Timestamp

from fake_worker.activities import ActivityFailure, ActivityRunner
from taskhub_programs import Bundle
from fake_worker.replay.executor import OPTIONAL_TIMER_FIRE_AT, TurnResult, execute
from taskhub_wire import pb

DEFAULT_START_NS = 1_735_689_600 * 1_000_000_000  # 2025-01-01T00:00:00Z
DEFAULT_STEP_NS = 1_000_000_000  # one second between turns
_MAX_DEPTH = 8  # nested children


class SimulationError(RuntimeError):
    """The run did not end within `max_turns` turns, or children nest too deep."""


@dataclass(frozen=True)
class External:
    """Something from outside the workflow, `at` seconds after the start of the simulation.

    kind: "raise" (an event `name` with payload `value`), "suspend", "resume", or "terminate"
    (`value` is the output).
    """

    kind: str = "raise"
    name: str = ""
    value: Any = None
    at: float = 0.0


EventSpec = Union[External, tuple]


@dataclass(frozen=True)
class Turn:
    """One turn: what the worker was sent, what it answered, and what the engine committed.

    The history after this turn is `past + committed`; `committed` is `new` (its WorkflowStarted
    carrying the reported version, as the engine records it) plus one event per action.
    """

    generation: int  # 0, then +1 after each continue-as-new
    time_ns: int
    past: tuple[pb.HistoryEvent, ...]
    new: tuple[pb.HistoryEvent, ...]
    result: TurnResult
    committed: tuple[pb.HistoryEvent, ...]

    @property
    def actions(self) -> tuple[pb.WorkflowAction, ...]:
        return self.result.actions

    @property
    def history(self) -> tuple[pb.HistoryEvent, ...]:
        return self.past + self.committed


def simulate(bundle: Bundle, name: str, input: Any = None, *, instance_id: str = "sim-1",
             events: Iterable[EventSpec] = (), start_ns: int = DEFAULT_START_NS, step_ns: int = DEFAULT_STEP_NS,
             max_batch: int | None = None, max_turns: int = 1000) -> list[Turn]:
    """Run workflow `name` with `input` until it completes or nothing is left to deliver.

    `events` are `External`s, or tuples (name, value) / (name, value, at) for raised events.
    Returns every turn in order (all generations of a continue-as-new chain).
    """
    sim = _Sim(bundle, instance_id, [_external(e) for e in events], step_ns, max_batch, max_turns, depth=0)
    return sim.run(_started_event(name, input, instance_id, start_ns), start_ns)


def final_status(turns: Sequence[Turn]) -> tuple[int | None, pb.CompleteWorkflowAction | None]:
    """The completion of the last turn: (status, action), or (None, None) if the workflow is still running."""
    for a in turns[-1].actions if turns else ():
        if a.HasField("completeWorkflow"):
            return a.completeWorkflow.workflowStatus, a.completeWorkflow
    return None, None


# ---------------------------------------------------------------------------- internals


def _external(spec: EventSpec) -> External:
    if isinstance(spec, External):
        if spec.kind not in ("raise", "suspend", "resume", "terminate"):
            raise ValueError(f"unknown External kind {spec.kind!r}")
        return spec
    if isinstance(spec, tuple) and len(spec) in (2, 3):
        return External("raise", str(spec[0]), spec[1], float(spec[2]) if len(spec) == 3 else 0.0)
    raise ValueError(f"an event is an External or a tuple (name, value[, at]); got {spec!r}")


def _ts(ns: int) -> Timestamp:
    out = Timestamp()
    out.seconds, out.nanos = divmod(ns, 1_000_000_000)
    return out


def _ns(stamp: Timestamp) -> int:
    return stamp.seconds * 1_000_000_000 + stamp.nanos


def _enc(value: Any) -> str:
    return json.dumps(value)


def _dec(msg: Any, field: str) -> Any:
    if msg.HasField(field) and getattr(msg, field).value:
        return json.loads(getattr(msg, field).value)
    return None


@dataclass
class _Entry:
    due_ns: int
    seq: int
    event: pb.HistoryEvent
    timer_event: str | None = None  # for fired timeout timers of a wait: the event name (R6.3)


class _Sim:
    def __init__(self, bundle: Bundle, iid: str, externals: list[External], step_ns: int, max_batch: int | None,
                 max_turns: int, *, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise SimulationError(f"children nest deeper than {_MAX_DEPTH} levels (at {iid})")
        self.bundle, self.iid, self.externals = bundle, iid, externals
        self.step_ns, self.max_batch, self.max_turns, self.depth = step_ns, max_batch, max_turns, depth
        self.inbox: list[_Entry] = []
        self.seq = 0
        self.runner = ActivityRunner(ledger=None)

    def push(self, due_ns: int, event: pb.HistoryEvent, timer_event: str | None = None) -> None:
        self.inbox.append(_Entry(due_ns, self.seq, event, timer_event))
        self.seq += 1

    def run(self, start: pb.HistoryEvent, start_ns: int) -> list[Turn]:
        name = start.executionStarted.name
        for ext in self.externals:
            self.push(start_ns + round(ext.at * 1_000_000_000), _external_event(ext))
        turns: list[Turn] = []
        history: list[pb.HistoryEvent] = []
        generation, now = 0, start_ns
        first: list[pb.HistoryEvent] | None = [start]
        while True:
            if len(turns) >= self.max_turns:
                raise SimulationError(f"{self.iid}: no end after {self.max_turns} turns")
            if first is None:
                if not self.inbox:
                    return turns
                now = max(now + self.step_ns, min(e.due_ns for e in self.inbox))
            ws = pb.HistoryEvent(eventId=-1, timestamp=_ts(now))
            ws.workflowStarted.SetInParent()
            new = [ws] + (first or []) + self.take_due(now)
            first = None
            result = execute(self.bundle, instance_id=self.iid, past=history, new=new)
            committed = self.commit(history, new, result, now)
            turns.append(Turn(generation=generation, time_ns=now, past=tuple(history), new=tuple(_copy(e) for e in new),
                              result=result, committed=tuple(committed)))
            history = history + committed
            done = self.apply(result, now)
            if done is None:
                continue
            if done[0] != "continue":
                return turns
            # continue-as-new: a new generation; old timers are forgotten, other inbox events stay.
            _, new_input, carry = done
            self.inbox = [e for e in self.inbox if not e.event.HasField("timerFired")]
            history, generation = [], generation + 1
            now += self.step_ns
            start = _started_event(name, None, self.iid, now)
            if new_input is not None:
                start.executionStarted.input.value = new_input
            first = [start] + [_copy(e) for e in carry]

    def take_due(self, now: int) -> list[pb.HistoryEvent]:
        due = sorted((e for e in self.inbox if e.due_ns <= now), key=lambda e: (e.due_ns, e.seq))
        if self.max_batch is not None:
            due = due[: self.max_batch]
        for e in due:
            self.inbox.remove(e)
        out = []
        for e in due:
            ev = _copy(e.event)
            ev.timestamp.CopyFrom(_ts(now))
            out.append(ev)
            if ev.HasField("eventRaised"):
                self.cancel_timeout_timer(ev.eventRaised.name)
        return out

    def cancel_timeout_timer(self, name: str) -> None:
        """R6.3: a committed EventRaised deletes the oldest pending timeout timer of a wait on that name."""
        folded = name.casefold()
        pending = sorted((e for e in self.inbox if e.timer_event is not None and e.timer_event.casefold() == folded),
                         key=lambda e: e.event.timerFired.timerId)
        if pending:
            self.inbox.remove(pending[0])

    def commit(self, history: list[pb.HistoryEvent], new: list[pb.HistoryEvent], result: TurnResult,
               now: int) -> list[pb.HistoryEvent]:
        events = [_copy(e) for e in new]
        if result.version_name or result.patches:
            recorded: list[str] = []
            for ev in history:
                if ev.HasField("workflowStarted") and ev.workflowStarted.HasField("version"):
                    recorded.extend(ev.workflowStarted.version.patches)
            fresh = list(result.patches)
            for p in recorded:  # keep only patches new to history (a multiset difference)
                if p in fresh:
                    fresh.remove(p)
            if fresh or result.version_name:
                v = events[0].workflowStarted.version
                v.SetInParent()
                v.patches.extend(fresh)
                if result.version_name:
                    v.name = result.version_name
        for a in result.actions:
            kind = a.WhichOneof("workflowActionType")
            ev = pb.HistoryEvent(eventId=a.id, timestamp=_ts(now))
            if kind == "scheduleTask":
                ev.taskScheduled.name = a.scheduleTask.name
                if a.scheduleTask.HasField("input"):
                    ev.taskScheduled.input.CopyFrom(a.scheduleTask.input)
                ev.taskScheduled.taskExecutionId = a.scheduleTask.taskExecutionId
            elif kind == "createTimer":
                ct = a.createTimer
                ev.timerCreated.fireAt.CopyFrom(ct.fireAt)
                origin = ct.WhichOneof("origin")
                if origin is not None:
                    getattr(ev.timerCreated, origin).CopyFrom(getattr(ct, origin))
            elif kind == "createChildWorkflow":
                cc = a.createChildWorkflow
                ev.childWorkflowInstanceCreated.name = cc.name
                ev.childWorkflowInstanceCreated.instanceId = cc.instanceId or f"{self.iid}:{a.id & 0xFFFF:04x}"
                if cc.HasField("input"):
                    ev.childWorkflowInstanceCreated.input.CopyFrom(cc.input)
            elif kind == "completeWorkflow":
                cw = a.completeWorkflow
                if cw.workflowStatus == pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
                    break  # the engine clears history; nothing more of this generation is committed
                ev.executionCompleted.workflowStatus = cw.workflowStatus
                if cw.HasField("result"):
                    ev.executionCompleted.result.CopyFrom(cw.result)
                if cw.HasField("failureDetails"):
                    ev.executionCompleted.failureDetails.CopyFrom(cw.failureDetails)
                events.append(ev)
                break  # the first completion wins; later actions are discarded
            else:
                continue
            events.append(ev)
        return events

    def apply(self, result: TurnResult, now: int) -> tuple | None:
        """Turn actions into future inbox events; a tuple when the run (or this generation) ends."""
        for a in result.actions:
            kind = a.WhichOneof("workflowActionType")
            if kind == "scheduleTask":
                self.push(*self.run_activity(a, now))
            elif kind == "createTimer":
                ct = a.createTimer
                if ct.fireAt == OPTIONAL_TIMER_FIRE_AT:
                    continue  # the optional timer of an indefinite wait never fires
                fired = pb.HistoryEvent(eventId=-1)
                fired.timerFired.timerId = a.id
                fired.timerFired.fireAt.CopyFrom(ct.fireAt)
                self.push(max(_ns(ct.fireAt), now), fired,
                          ct.externalEvent.name if ct.WhichOneof("origin") == "externalEvent" else None)
            elif kind == "createChildWorkflow":
                child = self.run_child(a, now)
                if child is not None:
                    self.push(*child)
            elif kind == "completeWorkflow":
                cw = a.completeWorkflow
                self.inbox = [e for e in self.inbox if not e.event.HasField("timerFired")]
                if cw.workflowStatus == pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
                    return ("continue", cw.result.value if cw.HasField("result") else None, list(cw.carryoverEvents))
                return ("done",)
            elif kind == "workflowVersionNotAvailable":
                return ("stalled",)
        return None

    def run_activity(self, a: pb.WorkflowAction, now: int) -> tuple[int, pb.HistoryEvent]:
        st = a.scheduleTask
        value = _dec(st, "input")
        ev = pb.HistoryEvent(eventId=-1)
        due = now + self.step_ns
        try:
            if st.name in ("sleep", "record"):
                # Pure: `sleep` only delays its result, `record` writes no ledger line.
                if st.name == "sleep":
                    due += round(max(0.0, float(value or 0)) * 1_000_000_000)
                out = value
            else:
                out = self.runner.run(name=st.name, input=value, instance_id=self.iid, task_id=a.id,
                                      task_execution_id=st.taskExecutionId)
        except ActivityFailure as exc:
            _fail(ev.taskFailed, a.id, exc.error_type, str(exc))
        except Exception as exc:  # noqa: BLE001 - a broken input fails the activity, as a worker would report it
            _fail(ev.taskFailed, a.id, type(exc).__name__, str(exc))
        else:
            ev.taskCompleted.taskScheduledId = a.id
            if out is not None:
                ev.taskCompleted.result.value = _enc(out)
        return due, ev

    def run_child(self, a: pb.WorkflowAction, now: int) -> tuple[int, pb.HistoryEvent] | None:
        cc = a.createChildWorkflow
        child_iid = cc.instanceId or f"{self.iid}:{a.id & 0xFFFF:04x}"
        sim = _Sim(self.bundle, child_iid, [], self.step_ns, self.max_batch, self.max_turns, depth=self.depth + 1)
        start = now + self.step_ns
        first = _started_event(cc.name, None, child_iid, start)
        if cc.HasField("input"):
            first.executionStarted.input.CopyFrom(cc.input)
        turns = sim.run(first, start)
        status, cw = final_status(turns)
        if cw is None:
            return None  # the child never completes
        ev = pb.HistoryEvent(eventId=-1)
        if status == pb.ORCHESTRATION_STATUS_COMPLETED:
            ev.childWorkflowInstanceCompleted.taskScheduledId = a.id
            if cw.HasField("result"):
                ev.childWorkflowInstanceCompleted.result.CopyFrom(cw.result)
        else:
            ev.childWorkflowInstanceFailed.taskScheduledId = a.id
            ev.childWorkflowInstanceFailed.failureDetails.CopyFrom(cw.failureDetails)
            if not cw.HasField("failureDetails"):
                ev.childWorkflowInstanceFailed.failureDetails.errorType = pb.OrchestrationStatus.Name(cw.workflowStatus)
        return turns[-1].time_ns + self.step_ns, ev

def _fail(body: Any, task_id: int, error_type: str, message: str) -> None:
    body.taskScheduledId = task_id
    body.failureDetails.errorType = error_type
    body.failureDetails.errorMessage = message


def _started_event(name: str, input: Any, iid: str, now: int) -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=-1, timestamp=_ts(now))
    es = ev.executionStarted
    es.name = name
    es.workflowInstance.instanceId = iid
    if input is not None:
        es.input.value = _enc(input)
    return ev


def _external_event(ext: External) -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=-1)
    if ext.kind == "raise":
        ev.eventRaised.name = ext.name
        if ext.value is not None:
            ev.eventRaised.input.value = _enc(ext.value)
    elif ext.kind == "suspend":
        ev.executionSuspended.SetInParent()
    elif ext.kind == "resume":
        ev.executionResumed.SetInParent()
    else:
        ev.executionTerminated.SetInParent()
        if ext.value is not None:
            ev.executionTerminated.input.value = _enc(ext.value)
    return ev


def _copy(ev: pb.HistoryEvent) -> pb.HistoryEvent:
    out = pb.HistoryEvent()
    out.CopyFrom(ev)
    return out
