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
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from taskhub_wire import pb

from fake_worker.programs import (
    All, AnyOf, Bundle, CallActivity, CallChild, ContinueAsNew, ExpressionError, Fail, If, IfPatched, Program,
    Return, SetStatus, SetVar, Step, Timer, WaitEvent, evaluate,
)
from fake_worker.replay.tasks import (
    Completable, EventWithTimeout, Retryable, RetrySpec, Task, TaskFailure, TimerTask, WhenAll, WhenAny,
)

_GUID_NAMESPACE = uuid.UUID("9e952958-5e33-4daf-827f-2fa12937b875")
_GUID_NAMESPACE_BYTES = _GUID_NAMESPACE.bytes
OPTIONAL_TIMER_FIRE_AT = Timestamp(seconds=253402300799, nanos=999999999)
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class TurnResult:
    actions: tuple[pb.WorkflowAction, ...]
    custom_status: str | None
    version_name: str | None
    patches: tuple[str, ...]

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


def from_json(text: str) -> Any:
    return json.loads(text)


def _uuid5(name: str) -> str:
    """str(uuid.uuid5(_GUID_NAMESPACE, name)), computed directly (the uuid module is the replay hot spot)."""
    h = bytearray(hashlib.sha1(_GUID_NAMESPACE_BYTES + name.encode("utf-8")).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50  # version 5
    h[8] = (h[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _to_datetime(stamp: Timestamp) -> datetime:
    return _EPOCH + timedelta(seconds=stamp.seconds, microseconds=stamp.nanos // 1000)


def _timestamp(dt: datetime) -> Timestamp:
    out = Timestamp()
    delta = dt - _EPOCH
    out.seconds = delta.days * 86400 + delta.seconds
    out.nanos = delta.microseconds * 1000
    return out


class _LazyActivity:
    """A plain ScheduleTask action not built yet: replay only needs its kind and name (see call())."""

    __slots__ = ("id", "name", "guid_name", "input")

    def __init__(self, id: int, name: str, guid_name: str, input: Any) -> None:
        self.id, self.name, self.guid_name, self.input = id, name, guid_name, input

    @property
    def scheduleTask(self) -> "_LazyActivity":  # noqa: N802 - quacks like WorkflowAction.scheduleTask
        return self

    def HasField(self, field: str) -> bool:  # noqa: N802
        return field == "scheduleTask"

    def WhichOneof(self, oneof: str) -> str:  # noqa: N802
        return "scheduleTask"

    def build(self) -> pb.WorkflowAction:
        action = pb.WorkflowAction(id=self.id)
        st = action.scheduleTask
        st.name, st.taskExecutionId = self.name, _uuid5(self.guid_name)
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
        self.now = datetime(1000, 1, 1)
        self._iso_of: datetime | None = None
        self._iso = ""
        self.received: dict[str, list[Any]] = {}
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

    # ------------------------------------------------------------ sequencing

    def next_id(self) -> int:
        self.seq += 1
        return self.seq

    def guid_name(self) -> str:
        """The name the next task execution id is derived from (UUIDv5 of it: `_uuid5`)."""
        if self._iso_of is not self.now:  # one isoformat() per turn time, not per call
            self._iso_of, self._iso = self.now, self.now.isoformat()
        name = f"{self.instance_id}_{self._iso}_{self.guid_counter}"
        self.guid_counter += 1
        return name

    def new_guid(self) -> str:
        return _uuid5(self.guid_name())

    # ------------------------------------------------------------ program driving

    def resume(self) -> None:
        if self.gen is None:
            raise _StateError("the workflow program is not running; was the history corrupted?")
        while self.current is not None and self.current.done:
            if self.current.failure is not None:
                nxt = self.gen.throw(self.current.failure)
            else:
                nxt = self.gen.send(self.current.result)
            self.current = nxt

    # ------------------------------------------------------------ completions

    def set_complete(self, result: Any, status: int, *, encoded: bool = False) -> None:
        if self.complete:
            return
        self.complete, self.status = True, status
        self.pending_actions.clear()
        action = pb.WorkflowAction(id=self.next_id())
        action.completeWorkflow.workflowStatus = status
        if result is not None:
            action.completeWorkflow.result.value = result if encoded else to_json(result)
        self.pending_actions[action.id] = action

    def set_failed(self, error_type: str, message: str) -> None:
        if self.complete:
            return
        self.complete, self.status = True, pb.ORCHESTRATION_STATUS_FAILED
        self.pending_actions.clear()
        action = pb.WorkflowAction(id=self.next_id())
        action.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_FAILED
        action.completeWorkflow.failureDetails.errorType = error_type
        action.completeWorkflow.failureDetails.errorMessage = message
        self.pending_actions[action.id] = action

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

    def actions(self) -> list[pb.WorkflowAction]:
        if self.status == pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
            action = pb.WorkflowAction(id=self.next_id())
            cw = action.completeWorkflow
            cw.workflowStatus = pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
            if self.new_input is not None:
                cw.result.value = to_json(self.new_input)
            if self.carry:
                for name, values in self.received.items():
                    for value in values:
                        ev = cw.carryoverEvents.add(eventId=-1)
                        ev.timestamp.SetInParent()
                        ev.eventRaised.name = name
                        if value:  # the SDKs drop falsy payloads here
                            ev.eventRaised.input.value = to_json(value)
            return [action]
        return [a.build() if isinstance(a, _LazyActivity) else a for a in self.pending_actions.values()]

    # ------------------------------------------------------------ scheduling

    def timer(self, fire_at: datetime | Timestamp, *, origin: str, origin_value: str | None = None,
              retry_of: Retryable | None = None) -> TimerTask:
        tid = self.next_id()
        action = pb.WorkflowAction(id=tid)
        ct = action.createTimer
        ct.fireAt.CopyFrom(fire_at if isinstance(fire_at, Timestamp) else _timestamp(fire_at))
        if origin == "createTimer":
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

    def call(self, *, name: str, input: Any, retry: RetrySpec | None, child: bool, instance_id: str | None,
             task_id: int | None = None, reuse: Retryable | None = None, execution_id: str = "") -> Task:
        tid = self.next_id() if task_id is None else task_id
        if not child and reuse is None and retry is None:
            # A plain activity call: most are replayed and matched by history, so the protobuf action,
            # its task execution id and its JSON input are only built, in actions(), if still pending.
            self.pending_actions[tid] = _LazyActivity(tid, name, self.guid_name(), input)  # type: ignore[assignment]
            self.pending_tasks[tid] = task = Completable()
            return task
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
        self.pending_actions[tid] = action
        task: Task
        if reuse is not None:
            task = reuse
        elif retry is None:
            task = Completable()
        else:
            task = Retryable(spec=retry, start=self.now, is_child=child, name=name, encoded_input=encoded,
                             task_execution_id=execution_id, instance_id=instance_id)
        self.pending_tasks[tid] = task
        return task

    def wait_event(self, name: str, timeout: timedelta | None) -> Task:
        event_task = Completable()
        key = name.casefold()
        buffered = self.received.get(key)
        if buffered:
            value = buffered.pop(0)
            if not buffered:
                del self.received[key]
            event_task.complete(value)
            return event_task
        self.waiting.setdefault(key, []).append(event_task)
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


def _retry_spec(step: CallActivity | CallChild) -> RetrySpec | None:
    r = step.retry
    if r is None:
        return None
    return RetrySpec(max_attempts=r.max_attempts, first_delay=timedelta(seconds=r.first_delay), backoff=r.backoff,
                     max_delay=None if r.max_delay is None else timedelta(seconds=r.max_delay))


def _make_task(ctx: _Context, step: Any, env: dict[str, Any]) -> Task:
    if isinstance(step, CallActivity):
        return ctx.call(name=step.name, input=evaluate(step.input, env), retry=_retry_spec(step), child=False,
                        instance_id=None)
    if isinstance(step, CallChild):
        iid = evaluate(step.instance_id, env) if step.instance_id is not None else None
        return ctx.call(name=step.workflow, input=evaluate(step.input, env), retry=_retry_spec(step), child=True,
                        instance_id=None if iid is None else str(iid))
    if isinstance(step, Timer):
        return ctx.timer(ctx.now + timedelta(seconds=step.duration), origin="createTimer")
    if isinstance(step, WaitEvent):
        return ctx.wait_event(step.name, None if step.timeout is None else timedelta(seconds=step.timeout))
    raise AssertionError(step)


def _run_steps(ctx: _Context, steps: Sequence[Step], env: dict[str, Any]) -> Generator[Task, Any, Any]:
    for step in steps:
        if isinstance(step, (CallActivity, CallChild, Timer, WaitEvent)):
            task = _make_task(ctx, step, env)
            try:
                value = yield task
            except TaskFailure as failure:
                if isinstance(step, WaitEvent) and step.has_default and failure.error_type == "TimeoutError":
                    value = evaluate(step.default, env)
                else:
                    raise
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, All):
            value = yield WhenAll([_make_task(ctx, t, env) for t in step.tasks])
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, AnyOf):
            children = [_make_task(ctx, t, env) for t in step.tasks]
            winner = yield WhenAny(children)
            if winner.failure is not None:
                raise winner.failure
            if step.as_:
                env[step.as_] = {"index": children.index(winner), "result": winner.result}
        elif isinstance(step, IfPatched):
            branch = step.then if ctx.is_patched(step.patch) else step.else_
            out = yield from _run_steps(ctx, branch, env)
            if isinstance(out, _Returned):
                return out
        elif isinstance(step, If):
            branch = step.then if evaluate(step.cond, env) else step.else_
            out = yield from _run_steps(ctx, branch, env)
            if isinstance(out, _Returned):
                return out
        elif isinstance(step, SetVar):
            env[step.var] = evaluate(step.value, env)
        elif isinstance(step, SetStatus):
            value = evaluate(step.value, env)
            ctx.custom_status = value if isinstance(value, str) or value is None else to_json(value)
        elif isinstance(step, ContinueAsNew):
            ctx.continue_as_new(evaluate(step.input, env), step.carry_events)
            return _Returned(None)
        elif isinstance(step, Return):
            return _Returned(evaluate(step.value, env))
        elif isinstance(step, Fail):
            raise ProgramFailure(step.type, str(evaluate(step.message, env)))
    return None


class ProgramFailure(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _program_body(ctx: _Context, program: Program, input: Any) -> Generator[Task, Any, Any]:
    env: dict[str, Any] = {"input": input, "instance_id": ctx.instance_id}
    out = yield from _run_steps(ctx, program.steps, env)
    return out.value if isinstance(out, _Returned) else None


def _start_program(ctx: _Context, program: Program, input: Any) -> None:
    gen = _program_body(ctx, program, input)
    try:
        first = next(gen)
    except StopIteration as stop:
        ctx.set_complete(stop.value, pb.ORCHESTRATION_STATUS_COMPLETED)
        return
    ctx.gen = gen
    ctx.current = first
    if first.done:
        ctx.resume()


# ---------------------------------------------------------------------------- event processing

_SUSPENDABLE_EXCLUDED = ("executionResumed", "executionTerminated")


# Message texts as dapr-ext-workflow 1.18.3 words them (method names of its context API).
_METHOD = {"scheduleTask": "call_activity", "createTimer": "create_timer", "createChildWorkflow": "call_sub_orchestrator"}
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


def _process(ctx: _Context, ev: pb.HistoryEvent) -> None:
    kind = ev.WhichOneof("eventType")
    if ctx.suspended and kind not in _SUSPENDABLE_EXCLUDED:
        ctx.suspended_events.append(ev)
        return
    try:
        _dispatch(ctx, ev, kind)
    except StopIteration as stop:
        ctx.set_complete(stop.value, pb.ORCHESTRATION_STATUS_COMPLETED)


def _dispatch(ctx: _Context, ev: pb.HistoryEvent, kind: str | None) -> None:
    if kind == "workflowStarted":
        ctx.now = _to_datetime(ev.timestamp)
        if ev.workflowStarted.HasField("version"):
            if ev.workflowStarted.version.name:
                ctx.pinned_version = ev.workflowStarted.version.name
            ctx.history_patches.update(ev.workflowStarted.version.patches)
    elif kind == "executionStarted":
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
    elif kind == "timerCreated":
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
    elif kind == "timerFired":
        task = ctx.pending_tasks.pop(ev.timerFired.timerId, None)
        if task is None:
            return
        task.complete(None)
        retry_of = task.retry_of if isinstance(task, TimerTask) else None
        if retry_of is not None:
            ctx.call(name=retry_of.name, input=None, retry=retry_of.spec, child=retry_of.is_child,
                     instance_id=retry_of.instance_id, reuse=retry_of, execution_id=retry_of.task_execution_id)
        else:
            ctx.resume()
    elif kind == "taskScheduled":
        tid = ev.eventId
        if tid in ctx.pending_actions and _is_optional_timer_action(ctx.pending_actions[tid]):
            ctx.drop_optional_at(tid)
        action = ctx.pending_actions.pop(tid, None)
        if action is None:
            raise _nondeterminism(tid, "call_activity")
        if not action.HasField("scheduleTask"):
            raise _wrong_type(tid, "call_activity", action)
        if action.scheduleTask.name != ev.taskScheduled.name:
            raise _wrong_name(tid, "call_activity", ev.taskScheduled.name, action.scheduleTask.name)
    elif kind in ("taskCompleted", "childWorkflowInstanceCompleted"):
        body = getattr(ev, kind)
        task = ctx.pending_tasks.pop(body.taskScheduledId, None)
        if task is None:
            return
        task.complete(from_json(body.result.value) if body.HasField("result") and body.result.value else None)
        ctx.resume()
    elif kind in ("taskFailed", "childWorkflowInstanceFailed"):
        body = getattr(ev, kind)
        tid = body.taskScheduledId
        task = ctx.pending_tasks.pop(tid, None)
        if task is None:
            return
        fd = body.failureDetails
        message = (f"{ctx.instance_id}: Activity task #{tid} failed: {fd.errorMessage}" if kind == "taskFailed"
                   else f"Sub-orchestration task #{tid} failed: {fd.errorMessage}")
        failure = TaskFailure("TaskFailedError", message, details=fd)
        if isinstance(task, Retryable) and fd.errorType != "NonRetryableError":  # dx ignores isNonRetriable
            delay = task.next_delay()
            if delay is not None:
                task.attempts += 1
                if kind == "taskFailed":
                    ctx.timer(ctx.now + delay, origin="activityRetry", origin_value=task.task_execution_id,
                              retry_of=task)
                else:
                    ctx.timer(ctx.now + delay, origin="childWorkflowRetry", origin_value=task.instance_id,
                              retry_of=task)
                return
        task.fail(failure)
        ctx.resume()
    elif kind == "childWorkflowInstanceCreated":
        tid = ev.eventId
        if tid in ctx.pending_actions and _is_optional_timer_action(ctx.pending_actions[tid]):
            ctx.drop_optional_at(tid)
        action = ctx.pending_actions.pop(tid, None)
        if action is None:
            raise _nondeterminism(tid, "call_sub_orchestrator")
        if not action.HasField("createChildWorkflow"):
            raise _wrong_type(tid, "call_sub_orchestrator", action)
        if action.createChildWorkflow.name != ev.childWorkflowInstanceCreated.name:
            raise _wrong_name(tid, "call_sub_orchestrator", ev.childWorkflowInstanceCreated.name,
                              action.createChildWorkflow.name)
    elif kind == "eventRaised":
        key = ev.eventRaised.name.casefold()
        value = from_json(ev.eventRaised.input.value) if ev.eventRaised.HasField("input") and ev.eventRaised.input.value else None
        waiters = ctx.waiting.get(key)
        if waiters:
            task = waiters.pop(0)
            if not waiters:
                del ctx.waiting[key]
            task.complete(value)
            ctx.resume()
        else:
            ctx.received.setdefault(key, []).append(value)
    elif kind == "executionSuspended":
        ctx.suspended = True
    elif kind == "executionResumed" and ctx.suspended:
        ctx.suspended = False
        buffered, ctx.suspended_events = ctx.suspended_events, []
        for b in buffered:
            _process(ctx, b)
    elif kind == "executionTerminated":
        et = ev.executionTerminated
        ctx.set_complete(et.input.value if et.HasField("input") and et.input.value else None,
                         pb.ORCHESTRATION_STATUS_TERMINATED, encoded=True)
    elif kind == "executionStalled":
        return
    else:
        raise _StateError(f"Don't know how to handle event of type '{kind}'")


def execute(bundle: Bundle, *, instance_id: str, past: Sequence[pb.HistoryEvent],
            new: Sequence[pb.HistoryEvent]) -> TurnResult:
    """Replay `past`, apply `new`, and return what the worker answers for this turn."""
    if not new:
        raise ValueError("The new history event list must have at least one event in it.")
    ctx = _Context(bundle, instance_id)
    try:
        ctx.replaying = True
        for ev in past:
            _process(ctx, ev)
        ctx.replaying = False
        for ev in new:
            _process(ctx, ev)
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
                      patches=tuple(ctx.encountered))
