"""The pure replay executor: (bundle, instance, past events, new events) -> actions.

No I/O, deterministic. It replays the past events, then the new ones, through
the program interpreter, and answers what a Dapr SDK would: action ids counted
from 1, one task execution id per activity call (a UUIDv5 of instance id,
turn time and a per-execution counter, as the Dapr SDKs derive it), patches
decided as the Dapr SDKs decide them, and a history that does not match the
program reported as a FAILED completion with a NonDeterminismError.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from taskhub_wire import pb
from taskhub_wire.kinds import ActionKind, EventKind

from taskhub_programs import (
    All, AnyOf, Bundle, CallActivity, CallChild, ContinueAsNew, ExpressionError, Fail, If, IfPatched, Program,
    Return, SetStatus, SetVar, Spawn, Step, Timer, WaitEvent, compile_expr, text,
)
from fake_worker.replay.tasks import (
    Completable, EventWithTimeout, Retryable, RetrySpec, Task, TaskFailure, TimerTask, WhenAll, WhenAny,
)

_GUID_NAMESPACE = uuid.UUID("9e952958-5e33-4daf-827f-2fa12937b875")
_GUID_NAMESPACE_BYTES = _GUID_NAMESPACE.bytes
OPTIONAL_TIMER_FIRE_AT = Timestamp(seconds=253402300799, nanos=999999999)
_EPOCH = datetime(1970, 1, 1)
_NO_TURN_TIME = datetime(1000, 1, 1)  # the time before any WorkflowStarted
# The turn times a datetime can hold, in microseconds since the epoch (see _on_workflow_started).
_MIN_US = (datetime.min - _EPOCH) // timedelta(microseconds=1)
_MAX_US = (datetime.max - _EPOCH) // timedelta(microseconds=1)
Stamp = tuple[int, int]  # a WorkflowStarted timestamp: (seconds, nanos)


@dataclass(frozen=True)
class TurnResult:
    actions: tuple[pb.WorkflowAction, ...]
    custom_status: str | None
    version_name: str | None
    patches: tuple[str, ...]
    notes: tuple[str, ...] = ()  # oddities of the history worth a warning; not part of the answer

    def response(self, *, instance_id: str, completion_token: str) -> pb.WorkflowResponse:
        resp = pb.WorkflowResponse(instanceId=instance_id, completionToken=completion_token)
        resp.actions.extend(self.actions)
        if self.custom_status is not None:
            resp.customStatus.value = self.custom_status
        if self.version_name or self.patches:
            resp.version.patches.extend(self.patches)
            if self.version_name:
                resp.version.name = self.version_name
        return resp


@dataclass(eq=False)
class Wait:
    """One event wait of a traced run: its step, the event being processed when it was made and the
    EventRaised it took (None: still waiting, or timed out)."""

    step: Step | None
    member: int | None  # its index in an all/any, or None
    built: pb.HistoryEvent | None
    by: pb.HistoryEvent | None = None
    task: Task | None = None  # kept so that its id() stays its own while the run is traced


@dataclass(eq=False)
class Trace:
    """What a program did while a history replayed (`trace`), for the arrival classifier
    (conformance/arrival): the history's own event objects and the program's own step objects."""

    opened: dict[int, tuple[Step | None, int | None, pb.HistoryEvent | None]] = field(default_factory=dict)
    waits: list[Wait] = field(default_factory=list)
    tasks: list[tuple[Step, Task]] = field(default_factory=list)  # each task step's (or all/any's) task
    done: dict[int, pb.HistoryEvent] = field(default_factory=dict)  # id(step) -> the event that resolved it
    carried: tuple[pb.HistoryEvent | None, tuple[pb.HistoryEvent, ...]] | None = None  # (at, events)
    buffer: dict[str, list[pb.HistoryEvent]] = field(default_factory=dict)  # EventRaised not yet waited for
    waiting: dict[int, Wait] = field(default_factory=dict)
    error: str | None = None  # the history does not replay on this program


class NonDeterminismError(Exception):
    pass


class _VersionNotRegistered(Exception):
    pass


class _NotRegistered(Exception):
    pass


class _StateError(Exception):
    pass


def to_json(value: Any) -> str:
    """Payload encoding of the Dapr Python SDKs (json.dumps with default separators)."""
    return json.dumps(value)


_scan_json = json.JSONDecoder().scan_once


def from_json(text: str) -> Any:
    """json.loads(text). Payloads are decoded on every replay, so a payload that is exactly one JSON value
    goes straight to the C scanner; anything else (whitespace, trailing data, errors) to json.loads."""
    try:
        value, end = _scan_json(text, 0)
    except Exception:  # noqa: BLE001 - json.loads decides, and raises its own error
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _uuid5(name: str) -> str:
    """str(uuid.uuid5(_GUID_NAMESPACE, name)), computed directly (the uuid module is the replay hot spot)."""
    h = bytearray(hashlib.sha1(_GUID_NAMESPACE_BYTES + name.encode("utf-8")).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50  # version 5
    h[8] = (h[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _turn_time(stamp: Stamp | None) -> datetime:
    """A turn's time as the SDKs have it: naive UTC, to the microsecond."""
    if stamp is None:
        return _NO_TURN_TIME
    return _EPOCH + timedelta(0, stamp[0], stamp[1] // 1000)  # (days, seconds, microseconds)


def _guid_name(instance_id: str, now: datetime, counter: int) -> str:
    """The name a task execution id is derived from (UUIDv5 of it: `_uuid5`)."""
    return f"{instance_id}_{now.isoformat()}_{counter}"


def _timestamp(dt: datetime) -> Timestamp:
    out = Timestamp()
    delta = dt - _EPOCH
    out.seconds = delta.days * 86400 + delta.seconds
    out.nanos = delta.microseconds * 1000
    return out


class _LazyActivity(Completable):
    """A plain activity call: its task, and its ScheduleTask action not built yet, as replay only needs the
    action's kind and name (see call_plain()). One object for both: one allocation less per call."""

    __slots__ = ("id", "name", "stamp", "guid_counter", "input")

    def __init__(self, id: int, name: str, stamp: Stamp | None, guid_counter: int, input: Any) -> None:
        # Task.__init__ inlined: one of these is made for every activity call of every replay.
        self.done, self.result, self.failure, self.parent = False, None, None, None
        self.id, self.name, self.stamp, self.guid_counter, self.input = id, name, stamp, guid_counter, input

    @property
    def scheduleTask(self) -> "_LazyActivity":  # noqa: N802 - quacks like WorkflowAction.scheduleTask
        return self

    def HasField(self, field: str) -> bool:  # noqa: N802
        return field == ActionKind.SCHEDULE_TASK.field

    def WhichOneof(self, oneof: str) -> str:  # noqa: N802
        return "scheduleTask"

    def build(self, instance_id: str) -> pb.WorkflowAction:
        action = pb.WorkflowAction(id=self.id)
        st = action.scheduleTask
        st.name, st.taskExecutionId = self.name, _uuid5(_guid_name(instance_id, _turn_time(self.stamp),
                                                                     self.guid_counter))
        if self.input is not None:
            st.input.value = to_json(self.input)
        return action


class _Context:
    def __init__(self, bundle: Bundle, instance_id: str) -> None:
        self.bundle = bundle
        self.instance_id = instance_id
        self.replaying = True
        self.complete = False
        self.status: int | None = None
        self.pending_actions: dict[int, pb.WorkflowAction] = {}
        self.pending_tasks: dict[int, Task] = {}
        self.seq = 0
        self.guid_counter = 0
        self.default_spawns = 0  # spawns without an instance id so far in this execution: `<iid>-<n>`
        self.stamp: Stamp | None = None  # the turn's time, as a datetime only when asked for: see now
        self._now_of: Stamp | None = None
        self._now = _NO_TURN_TIME
        self.received: dict[str, list[Any]] = {}
        self.received_names: dict[str, list[str]] = {}  # case-folded key -> each buffered event's name as sent
        self.waiting: dict[str, list[Task]] = {}
        self.new_input: Any = None
        self.carry = False
        self.custom_status: str | None = None
        self.pinned_version: str | None = None
        self.version_used: str | None = None
        self.history_patches: set[str] = set()
        self.decided_patches: dict[str, bool] = {}
        self.encountered: list[str] = []
        self.gen: Generator[Task, Any, Any] | None = None
        self.current: Task | None = None
        self.suspended = False
        self.suspended_events: list[pb.HistoryEvent] = []
        self.started = False  # an ExecutionStarted was processed
        self.notes: list[str] = []  # what the worker should warn about (this module does no I/O)
        self.trace: Trace | None = None  # only `trace` sets it: the hooks below cost one test when off
        self.site: tuple[Step | None, int | None] = (None, None)  # the step (and all/any member) being made
        self.event: pb.HistoryEvent | None = None  # the event `trace` is processing

    # ------------------------------------------------------------ sequencing

    def next_id(self) -> int:
        self.seq += 1
        if self.trace is not None:
            self.trace.opened[self.seq] = (*self.site, self.event)
        return self.seq

    @property
    def now(self) -> datetime:
        """The turn's time (most replayed turns never ask for it)."""
        if self._now_of is not self.stamp:
            self._now, self._now_of = _turn_time(self.stamp), self.stamp
        return self._now

    def new_guid(self) -> str:
        name = _guid_name(self.instance_id, self.now, self.guid_counter)
        self.guid_counter += 1
        return _uuid5(name)

    # ------------------------------------------------------------ program driving

    def resume(self) -> None:
        gen = self.gen
        if gen is None:
            raise _StateError("the workflow program is not running; was the history corrupted?")
        current = self.current
        while current is not None and current.done:
            current = self.current = gen.throw(current.failure) if current.failure is not None else gen.send(
                current.result)

    # ------------------------------------------------------------ completions

    def set_complete(self, result: Any, status: int, *, encoded: bool = False) -> None:
        if self.complete:
            return
        self.complete, self.status = True, status
        self._clear_for_completion()
        action = pb.WorkflowAction(id=self.next_id())
        action.completeWorkflow.workflowStatus = status
        if result is not None:
            action.completeWorkflow.result.value = result if encoded else to_json(result)
        self.pending_actions[action.id] = action

    def set_failed(self, error_type: str, message: str) -> None:
        if self.complete:
            return
        self.complete, self.status = True, pb.ORCHESTRATION_STATUS_FAILED
        self._clear_for_completion()
        action = pb.WorkflowAction(id=self.next_id())
        action.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_FAILED
        action.completeWorkflow.failureDetails.errorType = error_type
        action.completeWorkflow.failureDetails.errorMessage = message
        self.pending_actions[action.id] = action

    def _clear_for_completion(self) -> None:
        """A completion drops the pending actions (as dapr-ext-workflow does) but this turn's spawns:
        nothing awaits a detached workflow, so the only answer that can carry it is this one, and
        durabletask-go, whose spawn the step follows, keeps every pending action on completion."""
        kept = {i: a for i, a in self.pending_actions.items()
                if type(a) is not _LazyActivity and a.HasField("createDetachedWorkflow")}
        self.pending_actions.clear()
        self.pending_actions.update(kept)

    def set_version_not_registered(self) -> None:
        self.pending_actions.clear()
        self.status = pb.ORCHESTRATION_STATUS_STALLED
        action = pb.WorkflowAction(id=self.next_id())
        action.workflowVersionNotAvailable.SetInParent()
        self.pending_actions[action.id] = action

    def continue_as_new(self, new_input: Any, carry: bool) -> None:
        if self.complete:
            return
        self.complete, self.status = True, pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
        self.pending_actions.clear()
        self.new_input, self.carry = new_input, carry
        if self.trace is not None and carry:
            self.trace.carried = (self.event, ())  # what it carries: the buffer once the turn is done

    def actions(self) -> list[pb.WorkflowAction]:
        if self.status == pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
            action = pb.WorkflowAction(id=self.next_id())
            cw = action.completeWorkflow
            cw.workflowStatus = pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
            if self.new_input is not None:
                cw.result.value = to_json(self.new_input)
            if self.carry:
                # Carried as received: the event's own name (not the case-folded key it is matched by)
                # and every payload, falsy ones included (0, false and "" are values, not absence).
                for key, values in self.received.items():
                    for name, value in zip(self.received_names.get(key, ()), values):
                        ev = cw.carryoverEvents.add(eventId=-1)
                        ev.timestamp.SetInParent()
                        ev.eventRaised.name = name
                        if value is not None:
                            ev.eventRaised.input.value = to_json(value)
            return [action]
        return [a.build(self.instance_id) if isinstance(a, _LazyActivity) else a for a in self.pending_actions.values()]

    # ------------------------------------------------------------ scheduling

    def timer(self, fire_at: datetime | Timestamp, *, origin: str, origin_value: str | None = None,
              retry_of: Retryable | None = None) -> TimerTask:
        tid = self.next_id()
        action = pb.WorkflowAction(id=tid)
        ct = action.createTimer
        ct.fireAt.CopyFrom(fire_at if isinstance(fire_at, Timestamp) else _timestamp(fire_at))
        if origin == "createTimer":  # the TimerCreated origin member, not the action kind
            ct.createTimer.SetInParent()
        elif origin == "externalEvent":
            ct.externalEvent.name = origin_value or ""
        elif origin == "activityRetry":
            ct.activityRetry.taskExecutionId = origin_value or ""
        elif origin == "childWorkflowRetry":
            ct.childWorkflowRetry.instanceId = origin_value or ""
        self.pending_actions[tid] = action
        task = TimerTask(retry_of=retry_of)
        self.pending_tasks[tid] = task
        return task

    def call_plain(self, name: str, input: Any) -> Task:
        """An activity call without retries: most are replayed and matched by history, so the protobuf
        action, its task execution id and its JSON input are only built, in actions(), if still pending."""
        self.seq = tid = self.seq + 1
        if self.trace is not None:
            self.trace.opened[tid] = (*self.site, self.event)
        call = _LazyActivity(tid, name, self.stamp, self.guid_counter, input)
        self.guid_counter += 1
        self.pending_actions[tid] = self.pending_tasks[tid] = call  # type: ignore[assignment]
        return call

    def call(self, *, name: str, input: Any, retry: RetrySpec | None, child: bool, instance_id: str | None,
             task_id: int | None = None, reuse: Retryable | None = None, execution_id: str = "",
             app: str | None = None, propagation: str | None = None) -> Task:
        if reuse is not None:
            app, propagation = reuse.app, reuse.propagation
        if not child and reuse is None and retry is None and app is None and propagation is None:
            return self.call_plain(name, input)
        tid = self.next_id() if task_id is None else task_id
        if not child and reuse is None:
            execution_id = self.new_guid()
        encoded = (to_json(input) if input is not None else None) if reuse is None else reuse.encoded_input
        action = pb.WorkflowAction(id=tid)
        if child:
            iid = instance_id if instance_id is not None else f"{self.instance_id}:{tid:04x}"
            instance_id = iid
            cc = action.createChildWorkflow
            cc.instanceId, cc.name = iid, name
            if encoded is not None:
                cc.input.value = encoded
        else:
            st = action.scheduleTask
            st.name, st.taskExecutionId = name, execution_id
            if encoded is not None:
                st.input.value = encoded
        if app is not None:
            action.router.targetAppID = app  # the engine stamps the source (R11.3)
        if propagation is not None:
            scope = _SCOPES[propagation]
            if child:
                action.createChildWorkflow.historyPropagationScope = scope
            else:
                action.scheduleTask.historyPropagationScope = scope
        self.pending_actions[tid] = action
        task: Task
        if reuse is not None:
            task = reuse
        elif retry is None:
            task = Completable()
        else:
            task = Retryable(spec=retry, start=self.now, is_child=child, name=name, encoded_input=encoded,
                             task_execution_id=execution_id, instance_id=instance_id, app=app,
                             propagation=propagation)
        self.pending_tasks[tid] = task
        return task

    def spawn(self, *, name: str, input: Any, instance_id: str | None) -> str:
        """A detached workflow (durabletask-go task/detached.go ScheduleNewWorkflow): an action now, no task;
        the value is its instance id, by default `<instance id>-<n>` (n counts default-id spawns)."""
        if instance_id is None:
            instance_id = f"{self.instance_id}-{self.default_spawns}"
            self.default_spawns += 1
        elif not instance_id:
            raise ProgramFailure("SpawnError", "a spawn's instance_id is empty; leave it out for the default id")
        action = pb.WorkflowAction(id=self.next_id())
        cd = action.createDetachedWorkflow
        cd.instanceId, cd.name = instance_id, name
        if input is not None:
            cd.input.value = to_json(input)
        self.pending_actions[action.id] = action
        return instance_id

    def wait_event(self, name: str, timeout: timedelta | None) -> Task:
        event_task = Completable()
        key = name.casefold()
        buffered = self.received.get(key)
        if buffered:
            value = buffered.pop(0)
            self.received_names[key].pop(0)
            if not buffered:
                del self.received[key], self.received_names[key]
            event_task.complete(value)
            if self.trace is not None:
                self.trace.waits.append(Wait(*self.site, built=self.event, by=self.trace.buffer[key].pop(0)))
            return event_task
        self.waiting.setdefault(key, []).append(event_task)
        if self.trace is not None:
            self.trace.waits.append(wait := Wait(*self.site, built=self.event, task=event_task))
            self.trace.waiting[id(event_task)] = wait
        if timeout is not None and timeout == timedelta(0):
            self._unwait(key, event_task)
            event_task.fail(TaskFailure("TimeoutError",
                                        f"Wait for external event {name!r} canceled immediately due to zero timeout"))
            return event_task
        fire: datetime | Timestamp = OPTIONAL_TIMER_FIRE_AT if timeout is None else self.now + timeout
        timer = self.timer(fire, origin="externalEvent", origin_value=name)
        return _TimedEvent(event_task, timer, name=name, timeout=timeout,
                           on_timeout=lambda: self._unwait(key, event_task))

    def _unwait(self, key: str, task: Task) -> None:
        pending = self.waiting.get(key)
        if pending and task in pending:
            pending.remove(task)
            if not pending:
                del self.waiting[key]

    def is_patched(self, patch: str) -> bool:
        if patch in self.decided_patches:
            value = self.decided_patches[patch]
        elif patch in self.history_patches:
            value = self.decided_patches[patch] = True
        elif self.replaying:
            value = self.decided_patches[patch] = False
        else:
            value = self.decided_patches[patch] = True
        if value:
            self.encountered.append(patch)
        return value

    def drop_optional_at(self, action_id: int) -> bool:
        """An indefinite event wait reserves an id for its optional timer; older histories lack it."""
        action = self.pending_actions.get(action_id)
        if action is None or not _is_optional_timer_action(action):
            return False
        del self.pending_actions[action_id]
        self.pending_tasks.pop(action_id, None)
        for old in sorted(k for k in self.pending_actions if k > action_id):
            a = self.pending_actions.pop(old)
            a.id = old - 1
            self.pending_actions[old - 1] = a
        for old in sorted(k for k in self.pending_tasks if k > action_id):
            self.pending_tasks[old - 1] = self.pending_tasks.pop(old)
        if self.trace is not None:
            opened = self.trace.opened
            opened.pop(action_id, None)
            for old in sorted(k for k in opened if k > action_id):
                opened[old - 1] = opened.pop(old)
        self.seq -= 1
        return True


class _TimedEvent(EventWithTimeout):
    def __init__(self, event: Task, timer: Task, *, name: str, timeout: timedelta | None, on_timeout) -> None:
        self.timeout = timeout
        super().__init__(event, timer, name=name, on_timeout=on_timeout)

    def child_done(self, child: Task) -> None:
        if self.done:
            return
        if child is self.timer:
            self.on_timeout()
            after = f" after {self.timeout!r}" if self.timeout is not None else ""
            self.fail(TaskFailure("TimeoutError", f"Timed out{after} waiting for external event {self.name!r}"))
            return
        super().child_done(child)


def _is_optional_timer_action(action: pb.WorkflowAction) -> bool:
    if type(action) is _LazyActivity:  # the common case, answered without a call into protobuf
        return False
    return (action.HasField("createTimer") and action.createTimer.HasField("externalEvent")
            and action.createTimer.fireAt == OPTIONAL_TIMER_FIRE_AT)


def _is_optional_timer_event(ev: pb.HistoryEvent) -> bool:
    # The sentinel fireAt with an externalEvent origin, or with no origin at all (older sidecars).
    return (ev.timerCreated.WhichOneof("origin") in (None, "externalEvent")
            and ev.timerCreated.fireAt == OPTIONAL_TIMER_FIRE_AT)


# ---------------------------------------------------------------------------- the program interpreter


class _Returned:
    def __init__(self, value: Any) -> None:
        self.value = value


_SCOPES = {"own": pb.HISTORY_PROPAGATION_SCOPE_OWN_HISTORY, "lineage": pb.HISTORY_PROPAGATION_SCOPE_LINEAGE}


def _retry_spec(step: CallActivity | CallChild) -> RetrySpec | None:
    r = step.retry
    if r is None:
        return None
    return RetrySpec(max_attempts=r.max_attempts, first_delay=timedelta(seconds=r.first_delay), backoff=r.backoff,
                     max_delay=None if r.max_delay is None else timedelta(seconds=r.max_delay),
                     timeout=None if r.timeout is None else timedelta(seconds=r.timeout))


Env = dict[str, Any]
TaskMaker = Callable[[_Context, Env], Task]


@dataclass(frozen=True, slots=True)
class _Op:
    """A step with its expressions compiled (`compile_expr`), once per program: see `_ops_of`."""

    step: Step
    make: TaskMaker | None = None  # a task step (call_activity, call_child, timer, wait_event): its task
    makes: tuple[TaskMaker, ...] = ()  # all / any: their tasks
    value: Callable[[Env], Any] | None = None  # the step's expression (an if's cond, a wait's default, ...)
    then: tuple[_Op, ...] = ()
    else_: tuple[_Op, ...] = ()


def _task_maker(step: Any) -> TaskMaker:
    if isinstance(step, CallActivity):
        name, input_of = step.name, compile_expr(step.input)
        if step.retry is None and step.app is None and step.propagation is None:
            return lambda ctx, env: ctx.call_plain(name, input_of(env))
        return lambda ctx, env: ctx.call(name=name, input=input_of(env), retry=_retry_spec(step), child=False,
                                         instance_id=None, app=step.app, propagation=step.propagation)
    if isinstance(step, CallChild):
        input_of = compile_expr(step.input)
        iid_of = compile_expr(step.instance_id) if step.instance_id is not None else None

        def call_child(ctx: _Context, env: Env) -> Task:
            iid = iid_of(env) if iid_of is not None else None
            return ctx.call(name=step.workflow, input=input_of(env), retry=_retry_spec(step), child=True,
                            instance_id=None if iid is None else text(iid), app=step.app,
                            propagation=step.propagation)

        return call_child
    # Durations stay floats here: converting them now would raise a too-large one before its step runs.
    if isinstance(step, Timer):
        return lambda ctx, env: ctx.timer(ctx.now + timedelta(seconds=step.duration), origin="createTimer")
    if isinstance(step, WaitEvent):
        return lambda ctx, env: ctx.wait_event(step.name,
                                               None if step.timeout is None else timedelta(seconds=step.timeout))
    raise AssertionError(step)


def _compile(steps: Sequence[Step]) -> tuple[_Op, ...]:
    return tuple(_compile_step(step) for step in steps)


def _compile_step(step: Step) -> _Op:
    if isinstance(step, (CallActivity, CallChild, Timer, WaitEvent)):
        default = compile_expr(step.default) if isinstance(step, WaitEvent) and step.has_default else None
        return _Op(step, make=_task_maker(step), value=default)
    if isinstance(step, (All, AnyOf)):
        return _Op(step, makes=tuple(_task_maker(t) for t in step.tasks))
    if isinstance(step, IfPatched):
        return _Op(step, then=_compile(step.then), else_=_compile(step.else_))
    if isinstance(step, If):
        return _Op(step, value=compile_expr(step.cond), then=_compile(step.then), else_=_compile(step.else_))
    if isinstance(step, (SetVar, SetStatus, Return)):
        return _Op(step, value=compile_expr(step.value))
    if isinstance(step, ContinueAsNew):
        return _Op(step, value=compile_expr(step.input))
    if isinstance(step, Spawn):
        input_of = compile_expr(step.input)
        iid_of = compile_expr(step.instance_id) if step.instance_id is not None else None
        return _Op(step, value=lambda env: (input_of(env), None if iid_of is None else iid_of(env)))
    if isinstance(step, Fail):
        return _Op(step, value=compile_expr(step.message))
    return _Op(step)


# id(program) -> (program, its ops); the program is kept so that its id is not reused while cached.
_COMPILED: dict[int, tuple[Program, tuple[_Op, ...]]] = {}
_COMPILED_MAX = 256  # fuzz campaigns parse bundle after bundle


def _ops_of(program: Program) -> tuple[_Op, ...]:
    hit = _COMPILED.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    ops = _compile(program.steps)
    if len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.clear()
    _COMPILED[id(program)] = (program, ops)
    return ops


def _run_steps(ctx: _Context, ops: Sequence[_Op], env: Env) -> Generator[Task, Any, Any]:
    for op in ops:
        step = op.step
        if op.make is not None:  # a task step
            if ctx.trace is None:
                task = op.make(ctx, env)
            else:
                ctx.site = step, None
                task = op.make(ctx, env)
                ctx.trace.tasks.append((step, task))
            try:
                value = yield task
            except TaskFailure as failure:
                if op.value is not None and failure.error_type == "TimeoutError":  # a wait_event with a default
                    value = op.value(env)
                else:
                    raise
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, All):
            if ctx.trace is None:
                value = yield WhenAll([make(ctx, env) for make in op.makes])
            else:
                value = yield _traced(ctx, step, WhenAll(_members(ctx, step, op.makes, env)))
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, AnyOf):
            if ctx.trace is None:
                children = [make(ctx, env) for make in op.makes]
                winner = yield WhenAny(children)
            else:
                children = _members(ctx, step, op.makes, env)
                winner = yield _traced(ctx, step, WhenAny(children))
            if winner.failure is not None:
                raise winner.failure
            if step.as_:
                env[step.as_] = {"index": children.index(winner), "result": winner.result}
        elif isinstance(step, IfPatched):
            branch = op.then if ctx.is_patched(step.patch) else op.else_
            out = yield from _run_steps(ctx, branch, env)
            if isinstance(out, _Returned):
                return out
        elif isinstance(step, If):
            branch = op.then if op.value(env) else op.else_
            out = yield from _run_steps(ctx, branch, env)
            if isinstance(out, _Returned):
                return out
        elif isinstance(step, Spawn):
            input, iid = op.value(env)
            if ctx.trace is not None:
                ctx.site = step, None
            spawned = ctx.spawn(name=step.workflow, input=input, instance_id=None if iid is None else text(iid))
            if step.as_:
                env[step.as_] = spawned
        elif isinstance(step, SetVar):
            env[step.var] = op.value(env)
        elif isinstance(step, SetStatus):
            value = op.value(env)
            ctx.custom_status = value if isinstance(value, str) or value is None else text(value)
        elif isinstance(step, ContinueAsNew):
            ctx.continue_as_new(op.value(env), step.carry_events)
            return _Returned(None)
        elif isinstance(step, Return):
            return _Returned(op.value(env))
        elif isinstance(step, Fail):
            raise ProgramFailure(step.type, text(op.value(env)))
    return None


def _members(ctx: _Context, step: Step, makes: Sequence[TaskMaker], env: Env) -> list[Task]:
    tasks = []
    for i, make in enumerate(makes):
        ctx.site = step, i
        tasks.append(make(ctx, env))
    return tasks


def _traced(ctx: _Context, step: Step, task: Task) -> Task:
    ctx.trace.tasks.append((step, task))  # type: ignore[union-attr]  # only called while tracing
    return task


class ProgramFailure(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _program_result(out: _Returned | None) -> Any:
    """The workflow's result, from what the top-level `_run_steps` returned (the StopIteration value)."""
    return out.value if isinstance(out, _Returned) else None


def _start_program(ctx: _Context, program: Program, input: Any) -> None:
    # The program runs as the top-level _run_steps itself, without a wrapper generator: one generator
    # frame less on every resume; its return value is unwrapped where StopIteration is caught.
    env: dict[str, Any] = {"input": input, "instance_id": ctx.instance_id}
    gen = _run_steps(ctx, _ops_of(program), env)
    try:
        first = next(gen)
    except StopIteration as stop:
        ctx.set_complete(_program_result(stop.value), pb.ORCHESTRATION_STATUS_COMPLETED)
        return
    ctx.gen = gen
    ctx.current = first
    if first.done:
        ctx.resume()


# ---------------------------------------------------------------------------- event processing

_SUSPENDABLE_EXCLUDED = (EventKind.EXECUTION_RESUMED.field, EventKind.EXECUTION_TERMINATED.field)


# Message texts as dapr-ext-workflow 1.18.3 words them (method names of its context API).
_METHOD = {ActionKind.SCHEDULE_TASK.field: "call_activity", ActionKind.CREATE_TIMER.field: "create_timer",
           ActionKind.CREATE_CHILD_WORKFLOW.field: "call_sub_orchestrator",
           ActionKind.CREATE_DETACHED_WORKFLOW.field: "spawn"}
_CHANGED = ("This kind of mismatch can happen if an orchestration has non-deterministic logic or if the code was "
            "changed after an instance of this orchestration already started running.")


def _nondeterminism(action_id: int, method: str) -> NonDeterminismError:
    return NonDeterminismError(
        f"A previous execution called {method} with ID={action_id}, but the current execution doesn't have this "
        "action with this ID. This problem occurs when either the orchestration has non-deterministic logic or if "
        "the code was changed after an instance of this orchestration already started running.")


def _wrong_type(action_id: int, method: str, action: pb.WorkflowAction) -> NonDeterminismError:
    kind = action.WhichOneof("workflowActionType")
    return NonDeterminismError(
        f"Failed to restore orchestration state due to a history mismatch: A previous execution called {method} "
        f"with ID={action_id}, but the current execution is instead trying to call {_METHOD.get(kind, kind)} as "
        f"part of rebuilding it's history. {_CHANGED}")


def _wrong_name(action_id: int, method: str, expected: str, actual: str) -> NonDeterminismError:
    return NonDeterminismError(
        f"Failed to restore orchestration state due to a history mismatch: A previous execution called {method} "
        f"with name='{expected}' and sequence number {action_id}, but the current execution is instead trying to "
        f"call {actual} as part of rebuilding it's history. {_CHANGED}")


# Called unbound: a method looked up on a upb message is first searched for among its fields, every call.
_event_kind = pb.HistoryEvent.WhichOneof
_workflow_started_has = pb.WorkflowStartedEvent.HasField


def _process(ctx: _Context, events: Iterable[pb.HistoryEvent]) -> None:
    handlers = _HANDLERS
    for ev in events:
        kind = _event_kind(ev, "eventType")
        if ctx.suspended and kind not in _SUSPENDABLE_EXCLUDED:
            if kind != EventKind.EXECUTION_SUSPENDED.field:  # a second suspension while suspended changes nothing
                ctx.suspended_events.append(ev)
            continue
        handler = handlers.get(kind)  # type: ignore[arg-type]
        try:
            if handler is None:
                raise _unknown_kind(kind)
            handler(ctx, ev)
        except StopIteration as stop:  # the program returned
            ctx.set_complete(_program_result(stop.value), pb.ORCHESTRATION_STATUS_COMPLETED)


def _unknown_kind(kind: str | None) -> _StateError:
    return _StateError(f"Don't know how to handle event of type '{kind}'")


# One handler per event kind (dispatched on WhichOneof once per event; each reads only the fields it needs).


def _on_workflow_started(ctx: _Context, ev: pb.HistoryEvent) -> None:
    ts = ev.timestamp
    seconds, nanos = ts.seconds, ts.nanos
    if not _MIN_US <= seconds * 1_000_000 + nanos // 1000 <= _MAX_US:
        _turn_time((seconds, nanos))  # beyond datetime: raises now, the error converting it at once raised
    ctx.stamp = seconds, nanos
    ws = ev.workflowStarted
    if _workflow_started_has(ws, "version"):
        version = ws.version
        if version.name:
            ctx.pinned_version = version.name
        ctx.history_patches.update(version.patches)


def _on_execution_started(ctx: _Context, ev: pb.HistoryEvent) -> None:
    if ctx.started:
        # A second start is a duplicate, which the engine drops (engine-rules R2.7); running the
        # program again would answer with two programs' actions (e.g. completeWorkflow + scheduleTask).
        ctx.notes.append("ignored a second ExecutionStarted in one history (a duplicate start)")
        return
    ctx.started = True
    es = ev.executionStarted
    family = ctx.bundle.family(es.name)
    if family is None:
        raise _NotRegistered(f"A '{es.name}' orchestrator was not registered.")
    program = family.resolve(ctx.pinned_version)
    if program is None:
        raise _VersionNotRegistered(ctx.pinned_version or "")
    if family.versioned:
        ctx.version_used = program.version
    data = from_json(es.input.value) if es.HasField("input") and es.input.value != "" else None
    _start_program(ctx, program, data)


def _on_timer_created(ctx: _Context, ev: pb.HistoryEvent) -> None:
    tid = ev.eventId
    pending = ctx.pending_actions.get(tid)
    if pending is not None and _is_optional_timer_action(pending) and not _is_optional_timer_event(ev):
        ctx.drop_optional_at(tid)
        pending = ctx.pending_actions.get(tid)
    if _is_optional_timer_event(ev) and (pending is None or not _is_optional_timer_action(pending)):
        return
    action = ctx.pending_actions.pop(tid, None)
    if action is None:
        raise _nondeterminism(tid, "create_timer")
    if not action.HasField("createTimer"):
        raise _wrong_type(tid, "create_timer", action)


def _on_timer_fired(ctx: _Context, ev: pb.HistoryEvent) -> None:
    task = ctx.pending_tasks.pop(ev.timerFired.timerId, None)
    if task is None:
        return
    task.complete(None)
    retry_of = task.retry_of if isinstance(task, TimerTask) else None
    if retry_of is not None:
        if ctx.trace is not None:  # the next attempt belongs to the step of the retry timer
            ctx.site = ctx.trace.opened.get(ev.timerFired.timerId, (None, None, None))[:2]
        ctx.call(name=retry_of.name, input=None, retry=retry_of.spec, child=retry_of.is_child,
                 instance_id=retry_of.instance_id, reuse=retry_of, execution_id=retry_of.task_execution_id)
    else:
        ctx.resume()


def _take_pending(ctx: _Context, tid: int, what: str) -> pb.WorkflowAction:
    """The pending action a history event at `tid` retires. An optional wait timer scheduled at that id
    gives way to the recorded action (the SDK no longer writes it); no pending action there is a
    nondeterminism, named as the SDK's method `what`."""
    action = ctx.pending_actions.get(tid)
    if action is not None and _is_optional_timer_action(action):
        ctx.drop_optional_at(tid)
    action = ctx.pending_actions.pop(tid, None)
    if action is None:
        raise _nondeterminism(tid, what)
    return action


def _on_task_scheduled(ctx: _Context, ev: pb.HistoryEvent) -> None:
    tid = ev.eventId
    action = _take_pending(ctx, tid, "call_activity")
    if type(action) is _LazyActivity:  # the common case: its name without a call into protobuf
        name = action.name
    elif action.HasField("scheduleTask"):
        name = action.scheduleTask.name
    else:
        raise _wrong_type(tid, "call_activity", action)
    expected = ev.taskScheduled.name
    if name != expected:
        raise _wrong_name(tid, "call_activity", expected, name)


def _on_completed(kind: str) -> Callable[[_Context, pb.HistoryEvent], None]:
    """The handler of taskCompleted or childWorkflowInstanceCompleted (the body field is named `kind`)."""

    def on_completed(ctx: _Context, ev: pb.HistoryEvent) -> None:
        body = getattr(ev, kind)
        task = ctx.pending_tasks.pop(body.taskScheduledId, None)
        if task is None:
            return
        result = body.result.value  # "" when unset
        task.complete(from_json(result) if result else None)
        ctx.resume()

    return on_completed


def _on_task_failed(ctx: _Context, ev: pb.HistoryEvent) -> None:
    _failed(ctx, ev.taskFailed, activity=True)


def _on_child_failed(ctx: _Context, ev: pb.HistoryEvent) -> None:
    _failed(ctx, ev.childWorkflowInstanceFailed, activity=False)


def _failed(ctx: _Context, body: pb.TaskFailedEvent | pb.ChildWorkflowInstanceFailedEvent, *, activity: bool) -> None:
    tid = body.taskScheduledId
    task = ctx.pending_tasks.pop(tid, None)
    if task is None:
        return
    fd = body.failureDetails
    message = (f"{ctx.instance_id}: Activity task #{tid} failed: {fd.errorMessage}" if activity
               else f"Sub-orchestration task #{tid} failed: {fd.errorMessage}")
    failure = TaskFailure("TaskFailedError", message, details=fd)
    if isinstance(task, Retryable) and fd.errorType != "NonRetryableError":  # dx ignores isNonRetriable
        delay = task.next_delay()
        if delay is not None:
            task.attempts += 1
            if ctx.trace is not None:  # the retry timer belongs to the step of the failed attempt
                ctx.site = ctx.trace.opened.get(tid, (None, None, None))[:2]
            if activity:
                ctx.timer(ctx.now + delay, origin="activityRetry", origin_value=task.task_execution_id,
                          retry_of=task)
            else:
                ctx.timer(ctx.now + delay, origin="childWorkflowRetry", origin_value=task.instance_id,
                          retry_of=task)
            return
    task.fail(failure)
    ctx.resume()


def _on_child_created(ctx: _Context, ev: pb.HistoryEvent) -> None:
    tid = ev.eventId
    action = _take_pending(ctx, tid, "call_sub_orchestrator")
    if not action.HasField("createChildWorkflow"):
        raise _wrong_type(tid, "call_sub_orchestrator", action)
    if action.createChildWorkflow.name != ev.childWorkflowInstanceCreated.name:
        raise _wrong_name(tid, "call_sub_orchestrator", ev.childWorkflowInstanceCreated.name,
                          action.createChildWorkflow.name)


def _on_detached_created(ctx: _Context, ev: pb.HistoryEvent) -> None:
    """Retires the spawn at this id (durabletask-go task/detached.go onDetachedWorkflowCreated): a replay
    does not spawn again; a spawn of another instance id at this point is a history mismatch."""
    tid = ev.eventId
    action = _take_pending(ctx, tid, "spawn")
    if type(action) is _LazyActivity or not action.HasField("createDetachedWorkflow"):
        raise _wrong_type(tid, "spawn", action if type(action) is not _LazyActivity else action.build(ctx.instance_id))
    recorded, made = ev.detachedWorkflowInstanceCreated.instanceId, action.createDetachedWorkflow.instanceId
    if recorded != made:
        raise NonDeterminismError(
            f"Failed to restore orchestration state due to a history mismatch: A previous execution spawned instance "
            f"'{recorded}' with ID={tid}, but the current execution spawns '{made}'. {_CHANGED}")


def _on_event_raised(ctx: _Context, ev: pb.HistoryEvent) -> None:
    er = ev.eventRaised
    key = er.name.casefold()
    value = from_json(er.input.value) if er.HasField("input") and er.input.value else None
    waiters = ctx.waiting.get(key)
    if waiters:
        task = waiters.pop(0)
        if not waiters:
            del ctx.waiting[key]
        if ctx.trace is not None and (wait := ctx.trace.waiting.pop(id(task), None)) is not None:
            wait.by = ev
        task.complete(value)
        ctx.resume()
    else:
        ctx.received.setdefault(key, []).append(value)
        ctx.received_names.setdefault(key, []).append(er.name)
        if ctx.trace is not None:
            ctx.trace.buffer.setdefault(key, []).append(ev)


def _on_suspended(ctx: _Context, ev: pb.HistoryEvent) -> None:
    ctx.suspended = True


def _on_resumed(ctx: _Context, ev: pb.HistoryEvent) -> None:
    # Both real engines record a resume of a running instance: it changes nothing (docs/engine-rules.md R6.7).
    if not ctx.suspended:
        return
    ctx.suspended = False
    buffered, ctx.suspended_events = ctx.suspended_events, []
    _process(ctx, buffered)


def _on_terminated(ctx: _Context, ev: pb.HistoryEvent) -> None:
    et = ev.executionTerminated
    ctx.set_complete(et.input.value if et.HasField("input") and et.input.value else None,
                     pb.ORCHESTRATION_STATUS_TERMINATED, encoded=True)


def _on_stalled(ctx: _Context, ev: pb.HistoryEvent) -> None:
    return


_HANDLERS: dict[str, Callable[[_Context, pb.HistoryEvent], None]] = {
    EventKind.WORKFLOW_STARTED.field: _on_workflow_started,
    EventKind.EXECUTION_STARTED.field: _on_execution_started,
    EventKind.TIMER_CREATED.field: _on_timer_created,
    EventKind.TIMER_FIRED.field: _on_timer_fired,
    EventKind.TASK_SCHEDULED.field: _on_task_scheduled,
    EventKind.TASK_COMPLETED.field: _on_completed(EventKind.TASK_COMPLETED.field),
    EventKind.CHILD_WORKFLOW_INSTANCE_COMPLETED.field:
        _on_completed(EventKind.CHILD_WORKFLOW_INSTANCE_COMPLETED.field),
    EventKind.TASK_FAILED.field: _on_task_failed,
    EventKind.CHILD_WORKFLOW_INSTANCE_FAILED.field: _on_child_failed,
    EventKind.CHILD_WORKFLOW_INSTANCE_CREATED.field: _on_child_created,
    EventKind.DETACHED_WORKFLOW_INSTANCE_CREATED.field: _on_detached_created,
    EventKind.EVENT_RAISED.field: _on_event_raised,
    EventKind.EXECUTION_SUSPENDED.field: _on_suspended,
    EventKind.EXECUTION_RESUMED.field: _on_resumed,
    EventKind.EXECUTION_TERMINATED.field: _on_terminated,
    EventKind.EXECUTION_STALLED.field: _on_stalled,
}


def execute(bundle: Bundle, *, instance_id: str, past: Sequence[pb.HistoryEvent],
            new: Sequence[pb.HistoryEvent]) -> TurnResult:
    """Replay `past`, apply `new`, and return what the worker answers for this turn."""
    if not new:
        raise ValueError("The new history event list must have at least one event in it.")
    ctx = _Context(bundle, instance_id)
    try:
        ctx.replaying = True
        _process(ctx, past)
        ctx.replaying = False
        _process(ctx, new)
    except _VersionNotRegistered:
        ctx.set_version_not_registered()
    except NonDeterminismError as exc:
        ctx.set_failed("NonDeterminismError", str(exc))
    except _NotRegistered as exc:
        ctx.set_failed("OrchestratorNotRegisteredError", str(exc))
    except _StateError as exc:
        ctx.set_failed("WorkflowStateError", str(exc))
    except TaskFailure as exc:
        ctx.set_failed(exc.error_type, exc.message)
    except ProgramFailure as exc:
        ctx.set_failed(exc.error_type, str(exc))
    except ExpressionError as exc:
        ctx.set_failed("ExpressionError", str(exc))
    except Exception as exc:  # noqa: BLE001 - like the SDK: anything else fails the workflow
        ctx.set_failed(type(exc).__name__, str(exc))
    return TurnResult(actions=tuple(ctx.actions()), custom_status=ctx.custom_status, version_name=ctx.version_used,
                      patches=tuple(ctx.encountered), notes=tuple(ctx.notes))


def trace(bundle: Bundle, *, instance_id: str, history: Sequence[pb.HistoryEvent]) -> Trace:
    """Replay a committed history event by event and record which step made each action id, each
    event wait and what it took, when each step was resolved and what a continue-as-new carried."""
    ctx = _Context(bundle, instance_id)
    tr = ctx.trace = Trace()
    rest = iter(history)
    try:
        for ev in rest:
            if ev.HasField(EventKind.EXECUTION_COMPLETED.field):
                break  # the answer's own completion: the program ended before it
            ctx.event = ev
            try:
                _process(ctx, (ev,))
            finally:
                for step, task in tr.tasks:
                    if task.done and id(step) not in tr.done:
                        tr.done[id(step)] = ev
    except (TaskFailure, ProgramFailure, ExpressionError):
        # The program failed the workflow (its end, as `execute` answers it); the events after it
        # in its turn still reached the worker: the events among them stay unclaimed.
        for ev in rest:
            if ev.HasField(EventKind.EVENT_RAISED.field):
                tr.buffer.setdefault(ev.eventRaised.name.casefold(), []).append(ev)
    except Exception as exc:  # noqa: BLE001 - a history the program cannot replay: what was seen so far
        tr.error = f"{type(exc).__name__}: {exc}"
    if tr.carried is not None:
        tr.carried = (tr.carried[0], tuple(e for evs in tr.buffer.values() for e in evs))
    return tr
