"""Valid histories: a program run on the reference's pure pieces with random interleavings.

`fake_worker.replay.simulate` runs a program with one fixed schedule (results one step after the
turn that asked for them, events at given times). The fuzzer needs every schedule an engine may
produce, and simulate has no hook for choosing one, so this module drives the same pure pieces
itself, with an engine's inbox in the middle:

- the worker's answer is `fake_worker.replay.execute(...)`;
- the instance, its history and its inbox are `taskhub_core.machine`'s state, and each answer is
  applied by `machine.apply`, the instance machine the reference sidecar runs (history layout,
  patch compaction, R2.8 stripping, enforced termination, timers visible from their fireAt, the
  R6.3 timeout cancellation, continue-as-new carry-over, timers forgotten on completion);
- this module only schedules: what a take delivers is `taskhub_core.delivery.deliver`'s, the rule
  the reference sidecar's dispatcher runs (every visible entry in inbox order after a
  WorkflowStarted, duplicates and a second ExecutionStarted dropped, a TimerFired stamped when it
  fires: the turn's time).

A `Chooser` makes every random decision, between takes: which activity results arrive (a result,
or a failure, in any order), which children finish and how, which events are raised, suspends,
resumes, terminations, how far the clock moves (timers fire when it passes their fireAt), and
whether a dispatched turn is abandoned and redelivered later (with whatever arrived meanwhile).
With a Hypothesis chooser every decision is a draw, so Hypothesis shrinks schedules; the smallest
choice is always "nothing happens".

Every turn a worker would be sent is recorded as a `TurnCase` (past, new).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from taskhub_core import machine
from taskhub_core.actions import execution_started
from taskhub_core.delivery import Delivery, deliver
from taskhub_core.inbox import will_be_suspended
from taskhub_core.state import InboxItem, InstanceState
from taskhub_core.timestamps import NEVER_NS, copy_event, ts
from taskhub_programs import Bundle
from taskhub_wire import pb

from conformance.dialects.turn import TurnCase
from conformance.targets.reference import ActivityRunner, execute, run_pure_activity

START_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z (the scenario wire format's default base)
EVENT_NAMES = ("go", "Go", "approve", "x", "other")
PAYLOADS: tuple[Any, ...] = (None, 1, "yes", {"ok": True}, [1, 2], 0, "", False, 2.5, {"k": "v"}, "é中")
ERROR_TYPES = ("ActivityFailure", "TimeoutError", "NonRetryableError", "ChildError")
STEPS_NS = (1_000_000, 1_000_000_000, 10_000_000_000, 60_000_000_000, 3_600_000_000_000, 86_400_000_000_000)


class Chooser(Protocol):
    def int(self, lo: int, hi: int) -> int: ...


def chance(c: Chooser, percent: int) -> bool:
    """True with about `percent` % probability; the smallest choice (what shrinking goes to) is False."""
    return c.int(0, 99) >= 100 - percent


def pick(c: Chooser, seq: Sequence[Any]) -> Any:
    return seq[c.int(0, len(seq) - 1)]


@dataclass
class RandomChooser:
    rng: random.Random

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


@dataclass
class DataChooser:
    """Hypothesis `st.data()` as a chooser: every decision is a draw (and shrinks)."""

    data: Any

    def int(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self.data.draw(st.integers(lo, hi))


@dataclass
class FastDataChooser:
    """`DataChooser` for hot loops: each decision is one integer choice of Hypothesis' choice
    sequence (`ConjectureData.draw_integer`, shrinking towards the lower bound), without building a
    strategy and a printed draw per decision, which costs more than a turn of the engine model.
    Falls back to `DataChooser` on a Hypothesis without that method."""

    data: Any

    def __post_init__(self) -> None:
        raw = getattr(self.data, "conjecture_data", None)
        self._draw = getattr(raw, "draw_integer", None)
        self._slow = DataChooser(self.data) if self._draw is None else None

    def int(self, lo: int, hi: int) -> int:
        if self._slow is not None:
            return self._slow.int(lo, hi)
        return self._draw(lo, hi, shrink_towards=lo)


# The worker answering each turn, when its own answers drive the schedule (self-oracle fuzzing);
# None: no answer in time.
Answerer = Callable[[TurnCase], "pb.WorkflowResponse | None"]


@dataclass
class SimRun:
    workflow: str
    input: Any
    instance_id: str
    cases: list[TurnCase] = field(default_factory=list)
    end: str = ""  # completed | failed | terminated | continued | stalled | quiescent | max-turns | ...
    generations: int = 1
    abandoned: int = 0  # answers the engine rejected (R3.13/R3.14); the turn was redelivered
    history: list[pb.HistoryEvent] = field(default_factory=list)  # the last generation's committed history


@dataclass
class _Activity:
    task_id: int
    name: str
    input: Any
    execution_id: str


class _Sim:
    def __init__(self, bundle: Bundle, workflow: str, input: Any, chooser: Chooser, *, instance_id: str,
                 start_ns: int, max_turns: int, max_generations: int, events: bool, suspend: bool,
                 terminate: bool, redeliver: bool, segments: bool, answer: Answerer | None = None,
                 perturb: bool = False) -> None:
        self.bundle, self.c, self.iid = bundle, chooser, instance_id
        self.answer, self.perturb = answer, perturb
        self.max_turns, self.max_generations = max_turns, max_generations
        self.events, self.suspend_ok, self.terminate_ok = events, suspend, terminate
        self.redeliver_ok, self.segments = redeliver, segments
        self.now = start_ns
        self.activities: list[_Activity] = []
        self.children: list[tuple[int, str, str]] = []  # (task id, instance id, name)
        self.runner = ActivityRunner(ledger=None)
        self.run = SimRun(workflow=workflow, input=input, instance_id=instance_id)
        self.state = InstanceState(iid=instance_id, name=workflow, execution_id=f"exec-{instance_id}-0")
        self.committed: tuple[pb.HistoryEvent, ...] = ()  # history after the last commit
        self.push(execution_started(name=workflow, iid=instance_id, now_ns=self.now,
                                    input=None if input is None else json.dumps(input),
                                    execution_id=f"exec-{instance_id}-0"))

    # ------------------------------------------------------------------ inbox

    def tick(self, step: int | None = None) -> int:
        self.now += step if step is not None else 1_000_000
        return self.now

    @property
    def inbox(self) -> tuple[InboxItem, ...]:
        return self.state.inbox

    def push(self, ev: pb.HistoryEvent) -> None:
        self.state, _ = machine.apply(self.state, machine.Arrive(event=ev))

    def _arrival(self) -> bool:
        """One thing arrives at the inbox (or the clock moves); False when the chooser picks 'nothing'."""
        options = ["nothing", "time"]
        if self.activities:
            options += ["activity", "activity"]
        if self.children:
            options.append("child")
        if self.events:
            options.append("raise")
        if self.suspend_ok:
            options.append("suspend")
        if self.terminate_ok and chance(self.c, 10):
            options.append("terminate")
        what = pick(self.c, options)
        if what == "nothing":
            return False
        if what == "time":
            due = sorted(e.visible_at for e in self.inbox if self.now < e.visible_at < NEVER_NS)
            if due and self.c.int(0, 1):
                self.now = due[0]
            else:
                self.tick(pick(self.c, STEPS_NS))
            return True
        self.tick()
        if what == "activity":
            self.push(self._activity_result(self.activities.pop(self.c.int(0, len(self.activities) - 1))))
        elif what == "child":
            self._arrival_child()
        elif what == "raise":
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now))
            ev.eventRaised.name = pick(self.c, EVENT_NAMES)
            value = pick(self.c, PAYLOADS)
            if value is not None:
                ev.eventRaised.input.value = json.dumps(value)
            self.push(ev)
        elif what == "suspend":
            # A suspend only while (in effect) running, a resume only while (in effect) suspended:
            # the last marker still in the inbox wins over history. (The reference engine checks
            # less: it accepts a second resume while a suspend is pending, see docs/fuzzing.md.)
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now))
            suspended = will_be_suspended(self.inbox, suspended=self.state.facts.suspended)
            if self.perturb and chance(self.c, 15):
                # Reachable on real engines (engine-rules R6.7: a second suspend is recorded; daprd
                # records a resume of a running instance): the other marker than the state asks for.
                suspended = not suspended
            if not suspended:
                ev.executionSuspended.SetInParent()
                if self.c.int(0, 1):
                    ev.executionSuspended.input.value = "maintenance"
            else:
                ev.executionResumed.SetInParent()
            self.push(ev)
        elif what == "terminate":
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now))
            ev.executionTerminated.SetInParent()
            value = pick(self.c, PAYLOADS)
            if value is not None:
                ev.executionTerminated.input.value = json.dumps(value)
            ev.executionTerminated.recurse = bool(self.c.int(0, 1))
            self.push(ev)
        return True

    def _arrival_child(self) -> None:
        task_id, child_id, _name = self.children.pop(self.c.int(0, len(self.children) - 1))
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.tick()))
        how = self.c.int(0, 2)
        if how == 0:
            ev.childWorkflowInstanceCompleted.taskScheduledId = task_id
            value = pick(self.c, PAYLOADS)
            if value is not None:
                ev.childWorkflowInstanceCompleted.result.value = json.dumps(value)
        else:
            ev.childWorkflowInstanceFailed.taskScheduledId = task_id
            if how == 1:  # a failed child; a terminated one (how == 2) sends no failureDetails
                fd = ev.childWorkflowInstanceFailed.failureDetails
                fd.errorType = pick(self.c, ERROR_TYPES)
                fd.errorMessage = f"child {child_id} failed"
        self.push(ev)

    def _activity_result(self, act: _Activity) -> pb.HistoryEvent:
        ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self.now))
        failure: tuple[str, str] | None = None
        out: Any = None
        if chance(self.c, 8):
            failure = (pick(self.c, ERROR_TYPES), "injected failure")
        else:
            out, failure = run_pure_activity(self.runner, name=act.name, input=act.input, instance_id=self.iid,
                                             task_id=act.task_id, task_execution_id=act.execution_id)
        if failure is not None:
            ev.taskFailed.taskScheduledId = act.task_id
            ev.taskFailed.failureDetails.errorType = failure[0]
            ev.taskFailed.failureDetails.errorMessage = failure[1]
            ev.taskFailed.taskExecutionId = act.execution_id
        else:
            ev.taskCompleted.taskScheduledId = act.task_id
            if out is not None:
                ev.taskCompleted.result.value = json.dumps(out)
            ev.taskCompleted.taskExecutionId = act.execution_id
        return ev

    # ------------------------------------------------------------------ turns

    def take(self) -> list[InboxItem]:
        return [e for e in self.inbox if e.visible_at <= self.now]

    def delivered(self, visible: list[InboxItem], turn_ns: int) -> Delivery:
        """The turn on `visible` (taskhub_core.delivery: the engine's rule, so the fuzzer's turns are its)."""
        facts = self.state.facts
        return deliver(visible, now_ns=self.now, clock=lambda: turn_ns, started=facts.started, resolved=facts.resolved)

    def simulate(self) -> SimRun:
        steps = self.steps()
        try:
            case = next(steps)
            while True:
                assert self.answer is not None
                case = steps.send(self.answer(case))
        except StopIteration as stop:
            return stop.value

    def steps(self) -> Generator[TurnCase, "pb.WorkflowResponse | None", SimRun]:
        """The schedule, step by step: yields each turn the worker must answer (only when
        `answer` is set) and takes the answer back; returns the run. Every draw happens between
        yields, so several runs stepped in a fixed order draw deterministically (`run_programs`)."""
        turns = 0
        redelivered = 0
        first = True
        while True:
            if not first:
                for _ in range(self.c.int(0, 4)):
                    if not self._arrival():
                        break
            first = False
            visible = self.take()
            if not visible:
                # Nothing arrived: the schedule ends here (the smallest choice), or whatever is
                # outstanding comes in: a result, or the clock runs to the next timer.
                due = sorted(e.visible_at for e in self.inbox if self.now < e.visible_at < NEVER_NS)
                if not (due or self.activities or self.children) or not chance(self.c, 85):
                    self.run.end = "quiescent"
                    return self._done()
                if self.activities and (not due or self.c.int(0, 1)):
                    self.tick()
                    self.push(self._activity_result(self.activities.pop(self.c.int(0, len(self.activities) - 1))))
                elif due:
                    self.now = due[0]
                else:
                    self._arrival_child()
                visible = self.take()
            if turns >= self.max_turns:
                self.run.end = "max-turns"
                return self._done()
            turns += 1
            turn = self.delivered(visible, self.tick())
            new = [copy_event(e) for e in turn.new_events]
            past = tuple(copy_event(e) for e in self.state.history)
            result = got = None
            if self.answer is None:
                result = execute(self.bundle, instance_id=self.iid, past=past, new=new)
                resp = result.response(instance_id=self.iid, completion_token="fuzz")
            else:
                got = yield TurnCase(self.iid, past, tuple(new), "dispatched")
                if got is None:
                    self.run.cases.append(TurnCase(self.iid, past, tuple(new), "dispatched"))
                    self.run.end = "no-answer"
                    return self._done()
                resp = got
            if self.redeliver_ok and redelivered < 2 and chance(self.c, 10):
                # The stream breaks before the answer lands: the turn is dispatched again later,
                # with whatever arrived meanwhile.
                redelivered += 1
                self.run.cases.append(TurnCase(self.iid, past, tuple(new), "redelivered", answer=result, got=got))
                continue
            now = self.tick(1000)
            before = self.state
            self.state, effects = machine.apply(self.state, machine.Answer(
                new_events=tuple(new), response=resp, consumed=frozenset(turn.consumed), decided_ns=now,
                now_ns=now, restart_ns=now + 1_000_000, next_execution_id=f"exec-{self.iid}-{self.run.generations}"))
            refused = next((e for e in effects if isinstance(e, (machine.Stalled, machine.Abandoned))), None)
            self.run.cases.append(TurnCase(self.iid, past, tuple(new), "dispatched", answer=result, got=got,
                                           committed=refused is None))
            if isinstance(refused, machine.Stalled):
                self.run.end = "stalled"
                return self._done()
            if isinstance(refused, machine.Abandoned):
                # R3.14 (an action id already in history: a stale answer) or a malformed answer: the
                # engine redelivers the turn later. The reference worker does this after a turn that
                # acted on an event and then saw ExecutionSuspended: on replay the produced events
                # are held with the suspension, so their actions are made again.
                self.run.abandoned += 1
                continue
            end = self._dispatch(effects, before, past)
            if end:
                return self._done(end)

    def _dispatch(self, effects: Sequence[machine.Effect], before: InstanceState,
                  past: tuple[pb.HistoryEvent, ...]) -> str:
        """What the engine hands out after a commit; the run's end ("" while it goes on)."""
        for effect in effects:
            if isinstance(effect, machine.Recorded):
                self.committed = before.history + effect.events
                if self.segments:
                    self.run.cases.append(TurnCase(self.iid, past, tuple(copy_event(e) for e in effect.events),
                                                   "segment"))
            elif isinstance(effect, machine.ActivityScheduled):
                req = effect.request
                value = json.loads(req.input.value) if req.HasField("input") and req.input.value else None
                self.activities.append(_Activity(req.taskId, req.name, value, req.taskExecutionId))
            elif isinstance(effect, machine.ChildStarted):
                child = effect.child
                self.children.append((child.parent_task_id, child.iid, child.start.executionStarted.name))
            elif isinstance(effect, machine.GenerationStarted):
                if self.run.generations >= self.max_generations:
                    return "continued"
                self.run.generations += 1
                self.now += 1_000_000  # the new generation's ExecutionStarted (restart_ns)
                self.activities, self.children = [], []
            elif isinstance(effect, machine.Finished):
                status = effect.completed.executionCompleted.workflowStatus
                return pb.OrchestrationStatus.Name(status).removeprefix("ORCHESTRATION_STATUS_").lower()
        return ""

    def _done(self, end: str = "") -> SimRun:
        if end:
            self.run.end = end
        # The last generation's committed history (a continue-as-new past the limit keeps the old one).
        self.run.history = list(self.committed if end == "continued" else self.state.history)
        return self.run


def run_program(bundle: Bundle, workflow: str, input: Any, chooser: Chooser, *, instance_id: str = "fz-1",
                start_ns: int = START_NS, max_turns: int = 10, max_generations: int = 3, events: bool = True,
                suspend: bool = True, terminate: bool = True, redeliver: bool = True,
                segments: bool = False, answer: Answerer | None = None, perturb: bool = False) -> SimRun:
    """Run `workflow` with a schedule made by `chooser`; every turn the worker is sent is in `cases`.

    `answer`: the worker whose answers the engine commits (default: the reference executor), so
    that every history is one a real engine would write for that worker. `perturb`: also the
    reachable oddities an engine may deliver (a second ExecutionSuspended, a resume while running)."""
    sim = _Sim(bundle, workflow, input, chooser, instance_id=instance_id, start_ns=start_ns, max_turns=max_turns,
               max_generations=max_generations, events=events, suspend=suspend, terminate=terminate,
               redeliver=redeliver, segments=segments, answer=answer, perturb=perturb)
    return sim.simulate()


@dataclass(frozen=True)
class Program:
    """One schedule of `run_programs`: a program, its input and its instance id."""

    workflow: str
    input: Any
    instance_id: str


def run_programs(bundle: Bundle, programs: Sequence[Program], chooser: Chooser,
                 answer_many: Callable[[list[tuple[int, TurnCase]]], list["pb.WorkflowResponse | None"]], *,
                 max_turns: int = 10, events: bool = True, suspend: bool = True, perturb: bool = False) -> list[SimRun]:
    """Several schedules at once, in lock step: each step, every unfinished run draws its next turn
    (in a fixed order), then all those turns are answered together by `answer_many([(run index,
    turn), ...])`, so a worker gets several turns in flight while the draws stay deterministic."""
    sims = [_Sim(bundle, p.workflow, p.input, chooser, instance_id=p.instance_id, start_ns=START_NS,
                 max_turns=max_turns, max_generations=3, events=events, suspend=suspend, terminate=True,
                 redeliver=True, segments=False, answer=lambda case: None, perturb=perturb) for p in programs]
    gens = [s.steps() for s in sims]
    runs: list[SimRun | None] = [None] * len(sims)
    asked: dict[int, TurnCase] = {}
    for i, g in enumerate(gens):
        try:
            asked[i] = next(g)
        except StopIteration as stop:
            runs[i] = stop.value
    while asked:
        order = sorted(asked)
        answers = answer_many([(i, asked[i]) for i in order])
        asked = {}
        for i, got in zip(order, answers):
            try:
                asked[i] = gens[i].send(got)
            except StopIteration as stop:
                runs[i] = stop.value
    return [r for r in runs if r is not None]
