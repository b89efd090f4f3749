"""Durable tasks the replay executor waits on: activities, children, timers, events, all/any.

A task completes with a result or fails with a `TaskFailure`; composite tasks
complete from their children. The semantics follow the Dapr SDKs (when_all
fails fast, when_any completes with the first child to finish, an event wait
with a timeout is a race of the event and its timer).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable


@dataclass
class TaskFailure(Exception):
    """A failed durable task, carried into the program like the SDKs raise it."""

    error_type: str
    message: str
    details: Any = None  # the TaskFailureDetails of the failed activity/child, when there is one

    def __str__(self) -> str:
        return self.message


class Task:
    __slots__ = ("done", "result", "failure", "parent")  # tasks are made on every replay: no __dict__

    def __init__(self) -> None:
        self.done = False
        self.result: Any = None
        self.failure: TaskFailure | None = None
        self.parent: "Composite | None" = None

    def complete(self, result: Any) -> None:
        if self.done:
            return
        self.done, self.result = True, result
        if self.parent is not None:
            self.parent.child_done(self)

    def fail(self, failure: TaskFailure) -> None:
        if self.done:
            return
        self.done, self.failure = True, failure
        if self.parent is not None:
            self.parent.child_done(self)


class Completable(Task):
    __slots__ = ()


class TimerTask(Completable):
    def __init__(self, *, retry_of: "Retryable | None" = None) -> None:
        super().__init__()
        self.retry_of = retry_of


@dataclass
class RetrySpec:
    max_attempts: int
    first_delay: timedelta
    backoff: float
    max_delay: timedelta | None
    timeout: timedelta | None = None  # no attempt once the delays so far reach it


class Retryable(Completable):
    """An activity or child call with a retry policy; the delay schedule matches the Dapr Python SDK."""

    def __init__(self, *, spec: RetrySpec, start: datetime, is_child: bool, name: str, encoded_input: str | None,
                 task_execution_id: str, instance_id: str | None, app: str | None = None,
                 propagation: str | None = None) -> None:
        super().__init__()
        self.app = app  # kept for every attempt: a retry goes to the same app with the same scope
        self.propagation = propagation
        self.spec = spec
        self.start = start
        self.attempts = 1
        self.is_child = is_child
        self.name = name
        self.encoded_input = encoded_input
        self.task_execution_id = task_execution_id
        self.instance_id = instance_id

    def next_delay(self) -> timedelta | None:
        if self.attempts >= self.spec.max_attempts:
            return None
        delay = total = 0.0
        for i in range(1, self.attempts + 1):
            delay = (self.spec.backoff ** (i - 1)) * self.spec.first_delay.total_seconds()
            if self.spec.max_delay is not None:
                delay = min(delay, self.spec.max_delay.total_seconds())
            total += delay
        # The timeout is measured on the delays alone, as the Dapr Python SDK does since it made the
        # check replay-safe (dapr-ext-workflow 1.18 task.py compute_next_delay): the same on every replay.
        if self.spec.timeout is not None and total >= self.spec.timeout.total_seconds():
            return None
        return timedelta(seconds=delay)


class Composite(Task):
    def __init__(self, children: list[Task]) -> None:
        super().__init__()
        self.children = children
        for c in children:
            c.parent = self
        for c in children:
            if c.done:
                self.child_done(c)

    def child_done(self, child: Task) -> None:
        raise NotImplementedError


class WhenAll(Composite):
    def child_done(self, child: Task) -> None:
        if self.done:
            return
        if child.failure is not None:
            self.fail(child.failure)
        elif all(c.done for c in self.children):
            self.complete([c.result for c in self.children])


class WhenAny(Composite):
    def child_done(self, child: Task) -> None:
        if not self.done:
            self.complete(child)


class EventWithTimeout(Composite):
    """The event wins: its data; the timer wins: a timeout (and the waiter stops listening)."""

    def __init__(self, event: Task, timer: Task, *, name: str, on_timeout: Callable[[], None]) -> None:
        self.event, self.timer, self.name, self.on_timeout = event, timer, name, on_timeout
        super().__init__([event, timer])

    def child_done(self, child: Task) -> None:
        if self.done:
            return
        if child is self.event:
            if child.failure is not None:
                self.fail(child.failure)
            else:
                self.complete(child.result)
        else:
            self.on_timeout()
            self.fail(TaskFailure("TimeoutError", f"Timed out waiting for external event {self.name!r}"))
