"""Driver for durabletask-dapr 0.17.4 ("dd"): the program language, interpreted with dd's own API.

Usage (with the python of a virtualenv made from requirements.txt, e.g. `.sdk/dd/bin/python`, and
the repository root on PYTHONPATH so that `taskhub_programs` can be imported):

    PYTHONPATH=/path/to/repo python driver.py --sidecar 127.0.0.1:4001 --programs bundle.json

Every program of the bundle becomes a dd orchestrator registered on a
`durabletask.worker.TaskHubGrpcWorker`; its body is a generator that walks the steps and yields dd
tasks (`ctx.call_activity`, `ctx.call_sub_orchestrator`, `ctx.create_timer`,
`ctx.wait_for_external_event`, `task.when_all`, `task.when_any`) and calls `ctx.is_patched`,
`ctx.set_custom_status` and `ctx.continue_as_new`. The built-in activities (echo, fail, sleep,
record) are registered as dd activities and run by the same `ActivityRunner` as the reference
worker, so their behaviour cannot drift.

How the steps map onto dd (see README.md for the consequences):

- `wait_event` with a timeout: dd's `wait_for_external_event(name)` has no timeout parameter. The
  driver uses the pattern of dd's own README ("Human interaction and durable timers"):
  `when_any([event, create_timer(timeout)])`; the timer wins -> `default`, or a `TimeoutError`.
  The timer is only created when the event is not already buffered (a buffered event completes
  the wait at once, as in the reference). `timeout: 0` creates no timer. Inside `any`, the same
  when_any is nested in the outer one, and a race won by that inner timer fails the step with
  TimeoutError. Inside `all` a timed-out wait would have to fail the when_all at once, which needs
  a composite task that fails when a timer wins: dd has none, so that is refused (exit 3), as is
  `timeout: 0` inside `any` (an already failed task).
- Named versions: dd resolves them in its worker (`_Registry.get_orchestrator`, the version pinned
  in OrchestratorStarted, `orchestratorVersionNotAvailable`), but `TaskHubGrpcWorker` has no public
  method to register one. The driver registers through `worker._registry.add_named_orchestrator(
  name, fn, version_name=..., is_latest=...)`, exactly the call dapr-ext-workflow's public
  `register_versioned_workflow` makes on the same registry class (and what tests/sdk/apps/dd_app.py
  does). This is the one reach below dd's public API.
- DAPR_API_TOKEN: dd does not read it itself; as a dd application would, the driver passes it as
  gRPC metadata `dapr-api-token` (the worker's public `metadata=` argument) when it is set.

Nothing in this process may import our generated protobuf modules (`taskhub_wire`): dd's own
generated modules live in the same descriptor pool. `taskhub_programs` and
`fake_worker.activities` import no protobuf; this is checked at start-up.

A step this driver cannot express with dd makes it refuse to start (exit 3) with a message that
names the step; nothing is emulated behind the SDK's back.

Prints `connected to HOST:PORT` once the work-item stream is open; stops cleanly on SIGTERM/SIGINT.
Exit codes: 0 stopped, 2 usage or bundle error, 3 capability gap, 4 could not connect.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import types
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from durabletask import task
from durabletask.worker import TaskHubGrpcWorker

EXIT_USAGE, EXIT_GAP, EXIT_CONNECT = 2, 3, 4
SDK = "durabletask-dapr 0.17.4"


def _die(code: int, message: str) -> None:
    print(f"dd-driver: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


# ------------------------------------------------------------------ the shared language (no protobuf)


def _import_language() -> tuple[types.ModuleType, types.ModuleType]:
    """Import taskhub_programs / fake_worker.activities (pure Python, no protobuf)."""
    try:
        import taskhub_programs as programs
        from fake_worker import activities
    except ModuleNotFoundError as exc:
        _die(EXIT_USAGE, f"cannot import the program language ({exc}); put the repository root on PYTHONPATH")
    ours = sorted(m for m in sys.modules if m == "taskhub_wire" or m.startswith("taskhub_wire."))
    if ours:
        _die(EXIT_USAGE, f"our generated protobuf modules were imported into the SDK process: {ours}")
    return programs, activities


# Set by init_language() (main calls it; nothing happens at import time).
P: Any = None  # taskhub_programs
A: Any = None  # fake_worker.activities


def init_language() -> None:
    global P, A
    if P is None:
        P, A = _import_language()


# ------------------------------------------------------------------ capability check


class CapabilityGap(Exception):
    """A step of the bundle that dd cannot express; the message names it by path."""


_RETRY_FIELDS = frozenset({"max_attempts", "first_delay", "backoff", "max_delay"})


def _supported() -> tuple[dict[type, frozenset[str]], dict[type, str]]:
    """Step kinds this driver can express with dd, the fields it honours per kind, and their names.

    A step kind or a dataclass field not listed here (a language extension this driver predates)
    is a capability gap, never silently ignored.
    """
    fields = {
        P.CallActivity: frozenset({"name", "input", "retry", "as_", "app", "propagation"}),
        P.CallChild: frozenset({"workflow", "input", "instance_id", "retry", "as_", "app", "propagation"}),
        P.Timer: frozenset({"duration", "as_"}),
        P.WaitEvent: frozenset({"name", "timeout", "default", "as_"}),
        P.All: frozenset({"tasks", "as_"}),
        P.AnyOf: frozenset({"tasks", "as_"}),
        P.IfPatched: frozenset({"patch", "then", "else_"}),
        P.If: frozenset({"cond", "then", "else_"}),
        P.SetVar: frozenset({"var", "value"}),
        P.SetStatus: frozenset({"value"}),
        P.ContinueAsNew: frozenset({"input", "carry_events"}),
        P.Return: frozenset({"value"}),
        P.Fail: frozenset({"message", "type"}),
    }
    names = {P.CallActivity: "call_activity", P.CallChild: "call_child", P.Timer: "timer",
             P.WaitEvent: "wait_event", P.All: "all", P.AnyOf: "any", P.IfPatched: "if_patched", P.If: "if",
             P.SetVar: "set", P.SetStatus: "set_status", P.ContinueAsNew: "continue_as_new",
             P.Return: "return", P.Fail: "fail"}
    return fields, names


def capability_gaps(bundle: Any) -> list[str]:
    """Every step of the bundle that this driver cannot express with dd, as 'path: reason'."""
    init_language()
    supported, kind_names = _supported()
    gaps: list[str] = []

    def fields(obj: Any) -> set[str]:
        return set(getattr(type(obj), "__dataclass_fields__", {}))

    def walk(steps: Sequence[Any], path: str, *, in_composite: str = "") -> None:
        for i, step in enumerate(steps):
            here = f"{path}[{i}]"
            kind = type(step)
            if kind not in supported:
                gaps.append(f"{here}: step kind {kind.__name__!r} is not expressible with {SDK} in this driver")
                continue
            here = f"{here}.{kind_names[kind]}"
            extra = fields(step) - supported[kind]
            if extra:
                gaps.append(f"{here}: field(s) {sorted(extra)} are not expressible with {SDK} in this driver")
            for name in ("app", "propagation"):  # workflows across apps, history propagation: not mapped yet
                if getattr(step, name, None) is not None:
                    gaps.append(f"{here}.{name}: not expressible in this driver yet")
            retry = getattr(step, "retry", None)
            if retry is not None and fields(retry) - _RETRY_FIELDS:
                gaps.append(f"{here}.retry: field(s) {sorted(fields(retry) - _RETRY_FIELDS)} have no "
                            "dd RetryPolicy equivalent")
            if in_composite == "all" and isinstance(step, P.WaitEvent) and step.timeout is not None:
                gaps.append(f"{here}: a wait with a timeout inside all: dd's wait_for_external_event has no "
                            "timeout and dd has no composite task that fails (and so fails the when_all) when "
                            "a timer wins")
            if in_composite == "any" and isinstance(step, P.WaitEvent) and step.timeout == 0:
                gaps.append(f"{here}: a wait with timeout 0 inside any: it must be a task that has already "
                            "failed, which dd's public API cannot make")
            if isinstance(step, (P.All, P.AnyOf)):
                walk(step.tasks, here, in_composite="all" if isinstance(step, P.All) else "any")
            if isinstance(step, (P.IfPatched, P.If)):
                walk(step.then, f"{here}.then")
                walk(step.else_, f"{here}.else")

    for name, family in bundle.programs.items():
        for vname, program in family.versions.items():
            walk(program.steps, f"$.programs.{name}" + (f".versions.{vname}" if vname else "") + ".steps")
    return gaps


# ------------------------------------------------------------------ the interpreter


class _Returned:
    def __init__(self, value: Any) -> None:
        self.value = value


_ERROR_CLASSES: dict[str, type[Exception]] = {}
_ERROR_LOCK = threading.Lock()


def error_class(name: str) -> type[Exception]:
    """An exception class with this exact name: dd reports a failure's errorType as the class name."""
    with _ERROR_LOCK:
        cls = _ERROR_CLASSES.get(name)
        if cls is None:
            cls = _ERROR_CLASSES[name] = type(name, (Exception,), {"__module__": __name__})
        return cls


def _retry_policy(retry: Any) -> task.RetryPolicy | None:
    if retry is None:
        return None
    return task.RetryPolicy(
        first_retry_interval=timedelta(seconds=retry.first_delay),
        max_number_of_attempts=retry.max_attempts,
        backoff_coefficient=retry.backoff,
        max_retry_interval=None if retry.max_delay is None else timedelta(seconds=retry.max_delay),
    )


def _make_task(ctx: task.OrchestrationContext, step: Any, env: dict[str, Any]) -> task.Task:
    """The dd task of a task step (a wait with a timeout is handled by _wait_with_timeout)."""
    if isinstance(step, P.CallActivity):
        return ctx.call_activity(step.name, input=P.evaluate(step.input, env), retry_policy=_retry_policy(step.retry))
    if isinstance(step, P.CallChild):
        iid = P.evaluate(step.instance_id, env) if step.instance_id is not None else None
        return ctx.call_sub_orchestrator(step.workflow, input=P.evaluate(step.input, env),
                                         instance_id=None if iid is None else str(iid),
                                         retry_policy=_retry_policy(step.retry))
    if isinstance(step, P.Timer):
        return ctx.create_timer(timedelta(seconds=step.duration))
    if isinstance(step, P.WaitEvent):
        if step.timeout is not None:  # only inside `any`, through _any_task (capability_gaps() checks)
            raise CapabilityGap("a wait with a timeout outside any")
        return ctx.wait_for_external_event(step.name)
    raise CapabilityGap(f"{type(step).__name__} is not a task")


def _timeout_error(step: Any) -> TimeoutError:
    return TimeoutError(f"Timed out after {timedelta(seconds=step.timeout)!r} waiting for external event "
                        f"{step.name!r}")


class _TimedWait:
    """A wait with a timeout inside `any`: when_any([event, timer]) nested in the outer when_any."""

    def __init__(self, ctx: task.OrchestrationContext, step: Any) -> None:
        self.step = step
        self.event = ctx.wait_for_external_event(step.name)
        self.timer = None
        self.task = self.event
        if not self.event.is_complete:  # a buffered event wins at once: no timer, as in the reference
            self.timer = ctx.create_timer(timedelta(seconds=step.timeout))
            self.task = task.when_any([self.event, self.timer])

    def result(self) -> Any:
        """The event's payload, or TimeoutError when the timer won the inner race."""
        if self.task is not self.event and self.task.get_result() is self.timer:
            raise _timeout_error(self.step)
        return self.event.get_result()


def _any_task(ctx: task.OrchestrationContext, step: Any, env: dict[str, Any]) -> tuple[task.Task, _TimedWait | None]:
    if isinstance(step, P.WaitEvent) and step.timeout is not None:
        timed = _TimedWait(ctx, step)
        return timed.task, timed
    return _make_task(ctx, step, env), None


def _wait_with_timeout(ctx: task.OrchestrationContext, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    """dd's README pattern: when_any([event, timer]); the timer wins -> default or TimeoutError."""
    event = ctx.wait_for_external_event(step.name)
    if event.is_complete:  # already buffered: no timer, as in the reference
        return event.get_result()
    if step.timeout > 0:
        timer = ctx.create_timer(timedelta(seconds=step.timeout))
        winner = yield task.when_any([event, timer])
        if winner is event:
            return event.get_result()
    if step.has_default:
        return P.evaluate(step.default, env)
    raise _timeout_error(step)


def _run_steps(ctx: task.OrchestrationContext, steps: Sequence[Any], env: dict[str, Any]) -> Iterator[Any]:
    for step in steps:
        if isinstance(step, P.WaitEvent) and step.timeout is not None:
            value = yield from _wait_with_timeout(ctx, step, env)
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, (P.CallActivity, P.CallChild, P.Timer, P.WaitEvent)):
            value = yield _make_task(ctx, step, env)
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, P.All):
            value = yield task.when_all([_make_task(ctx, t, env) for t in step.tasks])
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, P.AnyOf):
            made = [_any_task(ctx, t, env) for t in step.tasks]
            children = [child for child, _ in made]
            winner = yield task.when_any(children)
            if winner.is_failed:
                raise winner.get_exception()
            index = next(i for i, c in enumerate(children) if c is winner)
            timed = made[index][1]
            result = timed.result() if timed is not None else winner.get_result()
            if step.as_:
                env[step.as_] = {"index": index, "result": result}
        elif isinstance(step, P.IfPatched):
            branch = step.then if ctx.is_patched(step.patch) else step.else_
            out = yield from _run_steps(ctx, branch, env)
            if isinstance(out, _Returned):
                return out
        elif isinstance(step, P.If):
            branch = step.then if P.evaluate(step.cond, env) else step.else_
            out = yield from _run_steps(ctx, branch, env)
            if isinstance(out, _Returned):
                return out
        elif isinstance(step, P.SetVar):
            env[step.var] = P.evaluate(step.value, env)
        elif isinstance(step, P.SetStatus):
            value = P.evaluate(step.value, env)
            # A string as-is, None clears it, anything else as JSON (dd takes a str).
            ctx.set_custom_status(value if isinstance(value, str) or value is None else json.dumps(value))
        elif isinstance(step, P.ContinueAsNew):
            ctx.continue_as_new(P.evaluate(step.input, env), save_events=step.carry_events)
            return _Returned(None)
        elif isinstance(step, P.Return):
            return _Returned(P.evaluate(step.value, env))
        elif isinstance(step, P.Fail):
            raise error_class(step.type)(str(P.evaluate(step.message, env)))
        else:  # capability_gaps() refuses these before start; never reached
            raise CapabilityGap(f"step kind {type(step).__name__!r}")
    return None


def make_orchestrator(program: Any) -> Callable[..., Any]:
    """A fresh dd orchestrator function (a generator function) for one program version.

    dd takes a registered orchestrator's name from `fn.__name__` (`task.get_name`), so the function
    is named exactly like the workflow.
    """

    def orchestrator(ctx: task.OrchestrationContext, input: Any = None):  # noqa: A002 - dd passes it positionally
        env: dict[str, Any] = {"input": input, "instance_id": ctx.instance_id}
        out = yield from _run_steps(ctx, program.steps, env)
        return out.value if isinstance(out, _Returned) else None

    orchestrator.__name__ = orchestrator.__qualname__ = program.name
    return orchestrator


# ------------------------------------------------------------------ activities


def make_activity(runner: Any, name: str) -> Callable[..., Any]:
    def activity(ctx: task.ActivityContext, input: Any = None):  # noqa: A002
        try:
            return runner.run(name=name, input=input, instance_id=ctx.orchestration_id, task_id=ctx.task_id,
                              task_execution_id=ctx.task_execution_id)
        except A.ActivityFailure as exc:
            raise error_class(exc.error_type)(str(exc)) from None

    activity.__name__ = activity.__qualname__ = name  # dd registers activities under fn.__name__
    return activity


# ------------------------------------------------------------------ main


def register(worker: TaskHubGrpcWorker, bundle: Any, runner: Any) -> list[str]:
    registered = []
    for name, family in bundle.programs.items():
        if not family.versioned:
            worker.add_orchestrator(make_orchestrator(family.versions[""]))
            registered.append(name)
            continue
        for vname, program in family.versions.items():
            # No public method in dd 0.17.4; the call dapr-ext-workflow's register_versioned_workflow makes.
            worker._registry.add_named_orchestrator(name, make_orchestrator(program), version_name=vname,
                                                    is_latest=(vname == family.default))
            registered.append(f"{name}@{vname}" + (" (latest)" if vname == family.default else ""))
    for name in P.BUILTIN_ACTIVITIES:
        worker.add_activity(make_activity(runner, name))
    return registered


def load(path: str) -> Any:
    p = Path(path)
    try:
        return P.load_bundle(p)
    except P.ProgramError as exc:
        _die(EXIT_USAGE, str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sidecar", required=True, metavar="HOST:PORT", help="the sidecar's gRPC address")
    ap.add_argument("--programs", required=True, metavar="FILE", help="program bundle (.json, or .yaml with PyYAML)")
    ap.add_argument("--ledger", default=None, help="ledger file for the record activity (default: $CONFORMANCE_LEDGER)")
    args = ap.parse_args(argv)
    init_language()

    host, sep, port = args.sidecar.rpartition(":")
    if not sep or not host or not port.isdigit():
        _die(EXIT_USAGE, f"--sidecar {args.sidecar!r} is not HOST:PORT")

    bundle = load(args.programs)
    gaps = capability_gaps(bundle)
    if gaps:
        _die(EXIT_GAP, f"the bundle uses steps {SDK} cannot express (declared capability gap; refusing to "
                       "start):\n" + "\n".join(f"  - {g}" for g in gaps))

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    token = os.environ.get("DAPR_API_TOKEN")
    worker = TaskHubGrpcWorker(host_address=args.sidecar, metadata=[("dapr-api-token", token)] if token else None,
                               stop_timeout=5.0)
    registered = register(worker, bundle, A.ActivityRunner(ledger=args.ledger))
    print(f"dd-driver: registered {', '.join(registered)}", file=sys.stderr, flush=True)
    try:
        worker.start()  # returns once the GetWorkItems stream is open; RuntimeError after 10 s
    except Exception as exc:  # noqa: BLE001
        print(f"dd-driver: error: cannot connect to the sidecar at {args.sidecar}: {exc}", file=sys.stderr,
              flush=True)
        # The worker's non-daemon run loop keeps retrying Hello and stop() is a no-op before a
        # successful start, so a normal exit would hang.
        os._exit(EXIT_CONNECT)
    print(f"connected to {args.sidecar}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        worker.stop()
    print("dd-driver: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
