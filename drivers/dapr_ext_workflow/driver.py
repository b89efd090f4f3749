"""Driver for dapr-ext-workflow 1.18.3 ("dx"): the program language, interpreted with dx's own API.

Usage (with the python of a virtualenv made from requirements.txt, e.g. `.sdk/dx/bin/python`, and
the repository root on PYTHONPATH so that `taskhub_programs` can be imported):

    PYTHONPATH=/path/to/repo python driver.py --sidecar 127.0.0.1:4001 --programs bundle.json

Every program of the bundle becomes a dx workflow (versioned programs through
`WorkflowRuntime.register_versioned_workflow`, the default version marked latest); its body is a
generator that walks the steps and yields dx tasks (`ctx.call_activity`, `ctx.call_child_workflow`,
`ctx.create_timer`, `ctx.wait_for_external_event`, `when_all`, `when_any`) and calls
`ctx.is_patched`, `ctx.set_custom_status` and `ctx.continue_as_new`. The built-in activities
(echo, fail, sleep, record) are registered as dx activities and run by the same `ActivityRunner`
as the reference worker, so their behaviour cannot drift.

Only dx's public API (`dapr.ext.workflow`) is used. The one reach below the wrapper classes is
`WorkflowActivityContext.get_inner_context().task_execution_id` (a public method and property):
the `fail` and `record` activities key on the task execution id, which the wrapper does not expose.

Nothing in this process may import our generated protobuf modules (`taskhub_wire`): dx's own
generated modules live in the same descriptor pool. `taskhub_programs` and
`fake_worker.activities` import no protobuf; this is checked at start-up.

A step this driver cannot express with dx makes it refuse to start (exit 3) with a message that
names the step; nothing is emulated behind the SDK's back.

Prints `connected to HOST:PORT` once the work-item stream is open; stops cleanly on SIGTERM/SIGINT.
Exit codes: 0 stopped, 2 usage or bundle error, 3 capability gap, 4 could not connect.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import types
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from dapr.ext.workflow import (
    DaprWorkflowContext,
    RetryPolicy,
    WorkflowActivityContext,
    WorkflowRuntime,
    when_all,
    when_any,
)

EXIT_USAGE, EXIT_GAP, EXIT_CONNECT = 2, 3, 4


def _die(code: int, message: str) -> None:
    print(f"dx-driver: error: {message}", file=sys.stderr, flush=True)
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
    """A step of the bundle that dx cannot express; the message names it by path."""


_RETRY_FIELDS = frozenset({"max_attempts", "first_delay", "backoff", "max_delay"})


def _supported() -> tuple[dict[type, frozenset[str]], dict[type, str]]:
    """Step kinds this driver can express with dx, the fields it honours per kind, and their names.

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
    """Every step of the bundle that this driver cannot express with dx, as 'path: reason'."""
    init_language()
    supported, kind_names = _supported()
    gaps: list[str] = []

    def fields(obj: Any) -> set[str]:
        return set(getattr(type(obj), "__dataclass_fields__", {}))

    def walk(steps: Sequence[Any], path: str) -> None:
        for i, step in enumerate(steps):
            here = f"{path}[{i}]"
            kind = type(step)
            if kind not in supported:
                gaps.append(f"{here}: step kind {kind.__name__!r} is not expressible with dapr-ext-workflow "
                            "in this driver")
                continue
            here = f"{here}.{kind_names[kind]}"
            extra = fields(step) - supported[kind]
            if extra:
                gaps.append(f"{here}: field(s) {sorted(extra)} are not expressible with dapr-ext-workflow "
                            "in this driver")
            for name in ("app", "propagation"):  # workflows across apps, history propagation: not mapped yet
                if getattr(step, name, None) is not None:
                    gaps.append(f"{here}.{name}: not expressible in this driver yet")
            retry = getattr(step, "retry", None)
            if retry is not None and fields(retry) - _RETRY_FIELDS:
                gaps.append(f"{here}.retry: field(s) {sorted(fields(retry) - _RETRY_FIELDS)} have no "
                            "dx RetryPolicy equivalent")
            if isinstance(step, (P.All, P.AnyOf)):
                walk(step.tasks, here)
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
    """An exception class with this exact name: dx reports a failure's errorType as the class name."""
    with _ERROR_LOCK:
        cls = _ERROR_CLASSES.get(name)
        if cls is None:
            cls = _ERROR_CLASSES[name] = type(name, (Exception,), {"__module__": __name__})
        return cls


def _retry_policy(retry: Any) -> RetryPolicy | None:
    if retry is None:
        return None
    return RetryPolicy(
        first_retry_interval=timedelta(seconds=retry.first_delay),
        max_number_of_attempts=retry.max_attempts,
        backoff_coefficient=retry.backoff,
        max_retry_interval=None if retry.max_delay is None else timedelta(seconds=retry.max_delay),
    )


def _make_task(ctx: DaprWorkflowContext, step: Any, env: dict[str, Any]) -> Any:
    if isinstance(step, P.CallActivity):
        return ctx.call_activity(step.name, input=P.evaluate(step.input, env), retry_policy=_retry_policy(step.retry))
    if isinstance(step, P.CallChild):
        iid = P.evaluate(step.instance_id, env) if step.instance_id is not None else None
        return ctx.call_child_workflow(step.workflow, input=P.evaluate(step.input, env),
                                       instance_id=None if iid is None else str(iid),
                                       retry_policy=_retry_policy(step.retry))
    if isinstance(step, P.Timer):
        return ctx.create_timer(timedelta(seconds=step.duration))
    if isinstance(step, P.WaitEvent):
        return ctx.wait_for_external_event(
            step.name, timeout=None if step.timeout is None else timedelta(seconds=step.timeout))
    raise CapabilityGap(f"{type(step).__name__} is not a task")


def _run_steps(ctx: DaprWorkflowContext, steps: Sequence[Any], env: dict[str, Any]) -> Iterator[Any]:
    for step in steps:
        if isinstance(step, (P.CallActivity, P.CallChild, P.Timer, P.WaitEvent)):
            task = _make_task(ctx, step, env)
            try:
                value = yield task
            except TimeoutError:
                if isinstance(step, P.WaitEvent) and step.has_default:
                    value = P.evaluate(step.default, env)
                else:
                    raise
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, P.All):
            value = yield when_all([_make_task(ctx, t, env) for t in step.tasks])
            if step.as_:
                env[step.as_] = value
        elif isinstance(step, P.AnyOf):
            children = [_make_task(ctx, t, env) for t in step.tasks]
            winner = yield when_any(children)
            if winner.is_failed:
                raise winner.get_exception()
            if step.as_:
                index = next(i for i, c in enumerate(children) if c is winner)
                env[step.as_] = {"index": index, "result": winner.get_result()}
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
            # A string as-is, None clears it, anything else as JSON (dx takes a str).
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


def make_workflow(program: Any) -> Callable[..., Any]:
    """A fresh dx workflow function (a generator function) for one program version."""

    def workflow(ctx: DaprWorkflowContext, input=None):  # noqa: A002 - dx passes the input positionally
        env: dict[str, Any] = {"input": input, "instance_id": ctx.instance_id}
        out = yield from _run_steps(ctx, program.steps, env)
        return out.value if isinstance(out, _Returned) else None

    label = program.name + (f"_{program.version}" if program.version else "")
    workflow.__name__ = workflow.__qualname__ = "".join(c if c.isalnum() else "_" for c in label)
    return workflow


# ------------------------------------------------------------------ activities


def make_activity(runner: Any, name: str) -> Callable[..., Any]:
    def activity(ctx: WorkflowActivityContext, input=None):  # noqa: A002
        try:
            return runner.run(name=name, input=input, instance_id=ctx.workflow_id, task_id=ctx.task_id,
                              task_execution_id=ctx.get_inner_context().task_execution_id)
        except A.ActivityFailure as exc:
            raise error_class(exc.error_type)(str(exc)) from None

    activity.__name__ = activity.__qualname__ = f"builtin_{name}"
    return activity


# ------------------------------------------------------------------ main


def register(wfr: WorkflowRuntime, bundle: Any, runner: Any) -> list[str]:
    registered = []
    for name, family in bundle.programs.items():
        if not family.versioned:
            wfr.register_workflow(make_workflow(family.versions[""]), name=name)
            registered.append(name)
            continue
        for vname, program in family.versions.items():
            wfr.register_versioned_workflow(make_workflow(program), name=name, version_name=vname,
                                            is_latest=(vname == family.default))
            registered.append(f"{name}@{vname}" + (" (latest)" if vname == family.default else ""))
    for name in P.BUILTIN_ACTIVITIES:
        wfr.register_activity(make_activity(runner, name), name=name)
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
    ap.add_argument("--ready-timeout", type=float, default=30.0, help="seconds to wait for the work-item stream")
    args = ap.parse_args(argv)
    init_language()

    host, sep, port = args.sidecar.rpartition(":")
    if not sep or not host or not port.isdigit():
        _die(EXIT_USAGE, f"--sidecar {args.sidecar!r} is not HOST:PORT")

    bundle = load(args.programs)
    gaps = capability_gaps(bundle)
    if gaps:
        _die(EXIT_GAP, "the bundle uses steps dapr-ext-workflow 1.18.3 cannot express (declared capability "
                       "gap; refusing to start):\n" + "\n".join(f"  - {g}" for g in gaps))

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    wfr = WorkflowRuntime(host=host, port=port, worker_ready_timeout=args.ready_timeout)
    registered = register(wfr, bundle, A.ActivityRunner(ledger=args.ledger))
    print(f"dx-driver: registered {', '.join(registered)}", file=sys.stderr, flush=True)
    try:
        wfr.start()
    except Exception as exc:  # noqa: BLE001 - dx raises RuntimeError or grpc errors here
        try:
            wfr.shutdown()
        finally:
            _die(EXIT_CONNECT, f"cannot connect to the sidecar at {args.sidecar}: {exc}")
    print(f"connected to {args.sidecar}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        wfr.shutdown()
    print("dx-driver: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
