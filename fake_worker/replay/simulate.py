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
event due by then (at most `max_batch`), each stamped with the time it arrived. Activity results are due one step
after the turn that scheduled them (`sleep` adds its seconds), a timer at its
fireAt (the far-future optional timer of an indefinite wait never fires), a
child's completion one step after the child's own last turn (children are
simulated the same way, recursively), an `External` at start + `at` seconds.

The engine's rules are not mirrored here: the instance is `taskhub_core.machine`'s state, and each
answer is applied by `machine.apply` exactly as the reference sidecar applies it (R6.3 timeout
cancellation, continue-as-new carry-over, the first completion wins, ...). This module is only a
scheduler: when the next turn runs and when each result arrives in the inbox; what a turn delivers
is `taskhub_core.delivery.deliver`'s, the reference sidecar's rule (every visible event in arrival
order, at most `max_batch` besides the generation's ExecutionStarted and carried-over events). A
completion or a stall (a workflowVersionNotAvailable action, a patch mismatch) ends the run.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from fake_worker.activities import ActivityFailure, ActivityRunner
from taskhub_programs import Bundle
from fake_worker.replay.executor import TurnResult, execute
from taskhub_core import machine
from taskhub_core.actions import ChildStart, child_result, execution_started
from taskhub_core.delivery import deliver
from taskhub_core.timestamps import NEVER_NS, copy_event, ts
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
    carrying the reported version, as the engine records it) plus one event per action (nothing
    when the turn stalled).
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


def _enc(value: Any) -> str:
    return json.dumps(value)


def _dec(msg: Any, field: str) -> Any:
    if msg.HasField(field) and getattr(msg, field).value:
        return json.loads(getattr(msg, field).value)
    return None


class _Sim:
    def __init__(self, bundle: Bundle, iid: str, externals: list[External], step_ns: int, max_batch: int | None,
                 max_turns: int, *, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise SimulationError(f"children nest deeper than {_MAX_DEPTH} levels (at {iid})")
        self.bundle, self.iid, self.externals = bundle, iid, externals
        self.step_ns, self.max_batch, self.max_turns, self.depth = step_ns, max_batch, max_turns, depth
        self.runner = ActivityRunner(ledger=None)
        self.state = machine.InstanceState(iid=iid, name="")
        self.completed: pb.HistoryEvent | None = None  # the ExecutionCompleted, once the run ended with one
        self.abandoned: list[str] = []  # why each refused turn was refused
        self.pending: list[tuple[int, int, pb.HistoryEvent]] = []  # (due, order, event): not arrived yet
        self.order = itertools.count()
        ids = itertools.count(1)
        self.new_id = lambda: f"{iid}-exec-{next(ids)}"  # deterministic execution ids for children

    def arrive(self, event: pb.HistoryEvent, visible_at: int) -> None:
        self.state, _ = machine.apply(self.state, machine.Arrive(event=event, visible_at=visible_at))

    def later(self, event: pb.HistoryEvent, due: int) -> None:
        """`event` reaches the inbox at `due` (results, child completions, externals), so the inbox
        holds events in arrival order, as an engine's does."""
        heapq.heappush(self.pending, (due, next(self.order), event))

    def arrivals(self, now: int) -> None:
        while self.pending and self.pending[0][0] <= now:
            due, _, ev = heapq.heappop(self.pending)
            if not ev.HasField("timestamp"):
                ev.timestamp.CopyFrom(ts(due))  # stamped when it arrives (R2.6)
            self.arrive(ev, due)

    def run(self, start: pb.HistoryEvent, start_ns: int) -> list[Turn]:
        self.state = machine.InstanceState(iid=self.iid, name=start.executionStarted.name)
        self.arrive(start, 0)
        for ext in self.externals:
            self.later(_external_event(ext), start_ns + round(ext.at * 1_000_000_000))
        turns: list[Turn] = []
        generation, now, first = 0, start_ns, True
        while True:
            if len(turns) >= self.max_turns:
                raise SimulationError(f"{self.iid}: no end after {self.max_turns} turns")
            if not first:
                due = [e.visible_at for e in self.state.inbox if e.visible_at < NEVER_NS]
                due += [p[0] for p in self.pending]
                if not due:
                    return turns
                now = max(now + self.step_ns, min(due))
            first = False
            self.arrivals(now)
            facts = self.state.facts
            turn = deliver(self.state.inbox, now_ns=now, started=facts.started, resolved=facts.resolved,
                           limit=self.max_batch)
            new = [copy_event(e) for e in turn.new_events]
            past = self.state.history
            result = execute(self.bundle, instance_id=self.iid, past=list(past), new=new)
            answer = machine.Answer(new_events=tuple(new), response=result.response(instance_id=self.iid,
                                                                                   completion_token="sim"),
                                    consumed=frozenset(turn.consumed), decided_ns=now, now_ns=now,
                                    restart_ns=now + self.step_ns, new_id=self.new_id)
            self.state, effects = machine.apply(self.state, answer)
            committed = next((e.events for e in effects if isinstance(e, machine.Recorded)), ())
            turns.append(Turn(generation=generation, time_ns=now, past=past, new=tuple(copy_event(e) for e in new),
                              result=result, committed=committed))
            if not self.perform(effects, now):
                return turns
            if any(isinstance(e, machine.GenerationStarted) for e in effects):
                generation, now, first = generation + 1, now + self.step_ns, True

    def perform(self, effects: Sequence[machine.Effect], now: int) -> bool:
        """Run what the engine would dispatch; False when the run ends."""
        for effect in effects:
            if isinstance(effect, machine.ActivityScheduled):
                due, result = self.run_activity(effect.request, now)
                self.later(result, due)
            elif isinstance(effect, machine.ChildStarted):
                child = self.run_child(effect.child, now)
                if child is not None:
                    self.later(child[1], child[0])
            elif isinstance(effect, machine.Finished):
                self.completed = effect.completed
                return False
            elif isinstance(effect, machine.Stalled):
                return False
            elif isinstance(effect, machine.Abandoned):
                # Refused (R3.13, R3.14): nothing commits; the engine redelivers the turn later, with
                # whatever arrived meanwhile (the next step here).
                self.abandoned.append(effect.reason)
        return True

    def run_activity(self, req: pb.ActivityRequest, now: int) -> tuple[int, pb.HistoryEvent]:
        value = _dec(req, "input")
        ev = pb.HistoryEvent(eventId=-1)
        due = now + self.step_ns
        out, failure = run_pure_activity(self.runner, name=req.name, input=value, instance_id=self.iid,
                                         task_id=req.taskId, task_execution_id=req.taskExecutionId)
        if req.name == "sleep":  # pure: `sleep` only delays its result
            try:
                due += round(max(0.0, float(value or 0)) * 1_000_000_000)
            except (TypeError, ValueError, OverflowError) as exc:  # a broken input fails it, as a worker reports it
                out, failure = None, (type(exc).__name__, str(exc))
        if failure is not None:
            _fail(ev.taskFailed, req.taskId, *failure)
        else:
            ev.taskCompleted.taskScheduledId = req.taskId
            if out is not None:
                ev.taskCompleted.result.value = _enc(out)
        return due, ev

    def run_child(self, child: ChildStart, now: int) -> tuple[int, pb.HistoryEvent] | None:
        sim = _Sim(self.bundle, child.iid, [], self.step_ns, self.max_batch, self.max_turns, depth=self.depth + 1)
        start_ns = now + self.step_ns
        first = copy_event(child.start)
        first.timestamp.CopyFrom(ts(start_ns))
        turns = sim.run(first, start_ns)
        if sim.completed is None:
            return None  # the child never completes
        due = turns[-1].time_ns + self.step_ns
        return due, child_result(sim.completed.executionCompleted, task_id=child.parent_task_id, now_ns=due)


def run_pure_activity(runner: ActivityRunner, *, name: str, input: Any, instance_id: str, task_id: int,
                      task_execution_id: str) -> tuple[Any, tuple[str, str] | None]:
    """Run an activity the way a worker reports it, without side effects: `sleep` and `record`
    return their input (no sleeping, no ledger line). Returns (output, None) or (None, (error
    type, message))."""
    if name in ("sleep", "record"):
        return input, None
    try:
        return runner.run(name=name, input=input, instance_id=instance_id, task_id=task_id,
                          task_execution_id=task_execution_id), None
    except ActivityFailure as exc:
        return None, (exc.error_type, str(exc))
    except Exception as exc:  # noqa: BLE001 - a broken input fails the activity, as a worker would report it
        return None, (type(exc).__name__, str(exc))


def _fail(body: Any, task_id: int, error_type: str, message: str) -> None:
    body.taskScheduledId = task_id
    body.failureDetails.errorType = error_type
    body.failureDetails.errorMessage = message


def _started_event(name: str, input: Any, iid: str, now: int) -> pb.HistoryEvent:
    return execution_started(name=name, iid=iid, now_ns=now, input=None if input is None else _enc(input))


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
