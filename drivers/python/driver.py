"""The one driver of the Python SDKs: the program language interpreted with an SDK's own API.

Each SDK has a small adapter (drivers/<sdk>/driver.py) that says how to make a task, register a
workflow and start the worker with that SDK, and which capabilities its installed release lacks
(probed from the API, never from a version string). Everything else is here: walking the steps,
the built-in activities (run by the reference worker's own `ActivityRunner`, so they cannot
drift), the capability check, the command line and the exit codes.

    PYTHONPATH=<repo root> .sdk/dx/bin/python drivers/dapr_ext_workflow/driver.py \\
        --sidecar 127.0.0.1:4001 --programs bundle.json
    PYTHONPATH=<repo root> .sdk/dx/bin/python drivers/dapr_ext_workflow/driver.py --probe

`--probe` prints one JSON line, {"sdk": "<dist> <version>", "absent": {capability: reason}}, and
exits 0: the harness reads it before starting the driver and takes the absent capabilities off
the target's declared ones (conformance/targets/probe.py). When a bundle needs what the release
lacks, or a step the SDK cannot express, the driver exits 3 and writes one line per problem on
stderr: `cannot-express: {"path": ..., "capability": ..., "reason": ...}`.

Nothing in this process may import our generated protobuf modules (`taskhub_wire`): the SDK's own
generated modules live in the same descriptor pool. `taskhub_programs` and
`fake_worker.activities` import no protobuf; this is checked at start-up.

Prints `connected to HOST:PORT` once the work-item stream is open; stops cleanly on SIGTERM/SIGINT.
Exit codes: 0 stopped, 2 usage or bundle error, 3 capability gap, 4 could not connect.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Iterator, Protocol, Sequence

EXIT_USAGE, EXIT_GAP, EXIT_CONNECT = 2, 3, 4
GAP_PREFIX = "cannot-express: "


class Adapter(Protocol):
    """What the driver needs from one SDK; each method is one or two calls of that SDK's API."""

    tag: str  # short name for log lines: dx, dd
    sdk: str  # "<distribution> <version>", as installed
    wait_timeout: bool  # the SDK's event wait takes a timeout (else: when_any([event, timer]))
    custom_status: bool  # the workflow context has set_custom_status (else set_status steps are refused)

    def absent(self) -> dict[str, str]: ...  # capability -> why this release lacks it (probed)
    # `app` (another app's id) and `propagation` ("own" / "lineage") are None unless the step sets
    # them; a release without them declares crossapp / propagation absent, so they never arrive.
    def call_activity(self, ctx: Any, name: str, input: Any, retry: Any, *, app: str | None,
                      propagation: str | None) -> Any: ...
    def call_child(self, ctx: Any, workflow: str, input: Any, instance_id: str | None, retry: Any, *,
                   app: str | None, propagation: str | None) -> Any: ...
    def propagated(self, ctx: Any) -> Any: ...  # the activity's received history as the `propagated` built-in says
    def timer(self, ctx: Any, delay: timedelta) -> Any: ...
    def wait_event(self, ctx: Any, name: str, timeout: timedelta | None) -> Any: ...
    def when_all(self, tasks: list[Any]) -> Any: ...
    def when_any(self, tasks: list[Any]) -> Any: ...
    def activity_ids(self, ctx: Any) -> tuple[str, int, str]: ...  # instance id, task id, task execution id
    def runtime(self, *, address: str, ready_timeout: float) -> Any: ...
    def add_workflow(self, rt: Any, fn: Callable[..., Any], *, name: str, version: str | None, latest: bool) -> None: ...
    def add_activity(self, rt: Any, fn: Callable[..., Any], *, name: str) -> None: ...
    def start(self, rt: Any) -> None: ...
    def stop(self, rt: Any) -> None: ...


def _die(tag: str, code: int, message: str) -> None:
    print(f"{tag}-driver: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


@dataclass(frozen=True)
class Language:
    """taskhub_programs (P) and fake_worker.activities (A), imported when the driver starts."""

    P: Any
    A: Any

    @classmethod
    def load(cls, tag: str) -> "Language":
        try:
            import taskhub_programs
            from fake_worker import activities
        except ModuleNotFoundError as exc:
            _die(tag, EXIT_USAGE, f"cannot import the program language ({exc}); put the repository root on PYTHONPATH")
        ours = sorted(m for m in sys.modules if m == "taskhub_wire" or m.startswith("taskhub_wire."))
        if ours:
            _die(tag, EXIT_USAGE, f"our generated protobuf modules were imported into the SDK process: {ours}")
        return cls(P=taskhub_programs, A=activities)


# ------------------------------------------------------------------ what the bundle needs


def problems(bundle: Any, adapter: Adapter, lang: Language) -> list[dict[str, str]]:
    """Every use of a capability the release lacks and every step the adapter refuses."""
    from taskhub_programs.capabilities import needs

    absent = adapter.absent()
    out = [{"path": path, "capability": cap, "reason": f"SDK release {adapter.sdk} lacks {cap} (probed: {absent[cap]})"}
           for cap, path in needs(bundle) if cap in absent]
    out += [{"path": path, "capability": cap, "reason": _NOT_DRIVEN[cap].format(sdk=adapter.sdk)}
            for cap, path in needs(bundle) if cap in _NOT_DRIVEN and cap not in absent]
    P = lang.P

    def walk(steps: Sequence[Any], path: str, inside: str) -> None:
        for i, step in enumerate(steps):
            here = f"{path}[{i}]"
            if isinstance(step, P.Spawn):
                continue  # refused above, by its capability
            if type(step) not in _RUNNERS or type(step) not in P.STEP_NAMES:
                out.append({"path": here, "capability": "", "reason": f"step kind {type(step).__name__!r} is "
                            "newer than this driver"})
                continue
            here = f"{here}.{P.STEP_NAMES[type(step)]}"
            if isinstance(step, P.SetStatus) and not adapter.custom_status:
                out.append({"path": here, "capability": "", "reason": f"SDK release {adapter.sdk} lacks a custom "
                            "status (probed: the workflow context has no set_custom_status)"})
            if isinstance(step, P.WaitEvent) and step.timeout is not None and not adapter.wait_timeout:
                if inside == "all":  # it would have to fail the when_all when its timer wins
                    out.append({"path": here, "capability": "", "reason": "a wait with a timeout inside all: "
                                "the SDK's wait has no timeout, and no composite task fails when a timer wins"})
                if inside == "any" and step.timeout == 0:
                    out.append({"path": here, "capability": "", "reason": "a wait with timeout 0 inside any: "
                                "a task that has already failed, which the SDK's API cannot make"})
            if isinstance(step, (P.All, P.AnyOf)):
                walk(step.tasks, here, "all" if isinstance(step, P.All) else "any")
            if isinstance(step, (P.If, P.IfPatched)):
                walk(step.then, f"{here}.then", "")
                walk(step.else_, f"{here}.else", "")

    for name, family in bundle.programs.items():
        for vname, program in family.versions.items():
            walk(program.steps, f"$.programs.{name}" + (f".versions.{vname}" if vname else "") + ".steps", "")
    return out


# ------------------------------------------------------------------ probing a release's API
# Shared by the adapters: each asks its SDK's own classes, never a version number.


def takes(fn: Any, parameter: str) -> bool:
    """`fn` has a parameter of this name (a keyword the release accepts)."""
    try:
        return parameter in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def takes_name(fn: Any, parameter: str) -> bool:
    """The parameter's annotation is str or a union with str: the release calls an activity or workflow
    by name, not only through the registered function (dapr-ext-workflow before 1.16 read `fn.__name__`)."""
    try:
        annotation = inspect.signature(fn).parameters[parameter].annotation
    except (TypeError, ValueError, KeyError):
        return False
    if isinstance(annotation, str):  # `from __future__ import annotations`: the text as written
        return "str" in _union_members(annotation.strip().strip("'\""))
    import types
    import typing

    if annotation is str:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return str in typing.get_args(annotation)
    return False


def _union_members(text: str) -> list[str]:
    """The top-level members of `Union[A, B]`, `Optional[A]` or `A | B` written as text; else [text]."""
    for head in ("typing.Union[", "Union[", "typing.Optional[", "Optional["):
        if text.startswith(head) and text.endswith("]"):
            return _split_top(text[len(head):-1], ",")
    parts = _split_top(text, "|")
    return parts if len(parts) > 1 else [text]


def _split_top(text: str, sep: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for c in text:
        depth += (c == "[") - (c == "]")
        if c == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    return [*out, cur.strip()]


def fails_fast(task_module: Any, when_all: Callable[[list[Any]], Any]) -> bool | None:
    """Whether the release's when_all fails as soon as one task fails: two fresh tasks of its own
    task module, the first failed (cancel(), or fail() with its failure details in releases without
    cancel); None when it cannot be asked."""
    if task_module is None or not hasattr(task_module, "CompletableTask"):
        return None
    first, second = task_module.CompletableTask(), task_module.CompletableTask()
    both = when_all([first, second])
    try:
        if hasattr(first, "cancel"):
            first.cancel(RuntimeError("probe"))
        else:
            first.fail("probe", task_module.pb.TaskFailureDetails(errorMessage="probe"))
    except Exception:  # noqa: BLE001 - a release whose tasks fail differently: cannot tell
        return None
    return bool(both.is_complete)


def context_absences(ctx: Any, *, api: Any, task_module: Any, child: str) -> dict[str, str]:
    """What both Python SDKs' workflow contexts are asked alike: `ctx` the context class, `api` the module
    with RetryPolicy and when_all, `child` the name of the context's child-workflow call."""
    name, out = ctx.__name__, {}
    if not hasattr(ctx, "is_patched"):
        out["patching"] = out["patch_after_past"] = f"{name} has no is_patched"
    if not takes(ctx.continue_as_new, "save_events"):
        out["carry_events"] = "continue_as_new takes no save_events"
    if fails_fast(task_module, api.when_all) is False:
        out["all_fails_fast"] = "when_all waits for every task before it fails"
    if not hasattr(api, "RetryPolicy") or not takes(ctx.call_activity, "retry_policy"):
        out["retries"] = "no RetryPolicy, or call_activity takes no retry_policy"
    if not hasattr(api, "RetryPolicy") or not takes(api.RetryPolicy, "retry_timeout"):
        out["retry_timeout"] = "RetryPolicy takes no retry_timeout"
    if not hasattr(ctx, child):
        out["children"] = f"{name} has no {child}"
    if not takes(ctx.call_activity, "app_id") or not takes(getattr(ctx, child, None), "app_id"):
        out["crossapp"] = f"call_activity or {child} takes no app_id"
    return out


def proto_message(task_module: Any, message: str) -> Any:
    """The release's own generated message class (its `internal` package beside the task module)."""
    import importlib

    if task_module is None:
        return None
    package = task_module.__name__.rpartition(".")[0]
    for name in ("orchestrator_actions_pb2", "orchestrator_service_pb2"):
        try:
            found = getattr(importlib.import_module(f"{package}.internal.{name}"), message, None)
        except ImportError:
            continue
        if found is not None:
            return found
    return None


# ------------------------------------------------------------------ the interpreter


class _Returned:
    def __init__(self, value: Any) -> None:
        self.value = value


_ERROR_CLASSES: dict[str, type[Exception]] = {}
_ERROR_LOCK = threading.Lock()


def error_class(name: str) -> type[Exception]:
    """An exception class with this exact name: the Python SDKs report a failure's errorType as its class name."""
    with _ERROR_LOCK:
        cls = _ERROR_CLASSES.get(name)
        if cls is None:
            cls = _ERROR_CLASSES[name] = type(name, (Exception,), {"__module__": __name__})
        return cls


def _timeout_error(step: Any) -> TimeoutError:
    return TimeoutError(f"Timed out after {timedelta(seconds=step.timeout)!r} waiting for external event "
                        f"{step.name!r}")


@dataclass
class Interpreter:
    adapter: Adapter
    lang: Language

    def task(self, ctx: Any, step: Any, env: dict[str, Any]) -> Any:
        a, P = self.adapter, self.lang.P
        if isinstance(step, P.CallActivity):
            return a.call_activity(ctx, step.name, P.evaluate(step.input, env), step.retry, app=step.app,
                                   propagation=step.propagation)
        if isinstance(step, P.CallChild):
            iid = P.evaluate(step.instance_id, env) if step.instance_id is not None else None
            return a.call_child(ctx, step.workflow, P.evaluate(step.input, env),
                                None if iid is None else P.text(iid), step.retry, app=step.app,
                                propagation=step.propagation)
        if isinstance(step, P.Timer):
            return a.timer(ctx, timedelta(seconds=step.duration))
        if step.timeout is None or a.wait_timeout:  # WaitEvent
            return a.wait_event(ctx, step.name, None if step.timeout is None else timedelta(seconds=step.timeout))
        return _TimedWait(ctx, step, a).task  # only inside `any` (problems() refuses the rest)

    def wait_with_timeout(self, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
        """A timed wait as its own step: the SDK's own timeout, or when_any([event, timer])."""
        a = self.adapter
        if a.wait_timeout:
            try:
                return (yield a.wait_event(ctx, step.name, timedelta(seconds=step.timeout)))
            except TimeoutError:
                if step.has_default:
                    return self.lang.P.evaluate(step.default, env)
                raise
        event = a.wait_event(ctx, step.name, None)
        if event.is_complete:  # already buffered: no timer, as in the reference
            return event.get_result()
        if step.timeout > 0:
            timer = a.timer(ctx, timedelta(seconds=step.timeout))
            winner = yield a.when_any([event, timer])
            if winner is event:
                return event.get_result()
        if step.has_default:
            return self.lang.P.evaluate(step.default, env)
        raise _timeout_error(step)

    def steps(self, ctx: Any, steps: Sequence[Any], env: dict[str, Any]) -> Iterator[Any]:
        for step in steps:
            out = yield from _RUNNERS[type(step)](self, ctx, step, env)
            if isinstance(out, _Returned):
                return out
        return None

    def workflow(self, program: Any) -> Callable[..., Any]:
        """A fresh workflow function (a generator function) for one program version."""

        def workflow(ctx: Any, input: Any = None):  # noqa: A002 - the SDKs pass the input positionally
            env: dict[str, Any] = {"input": input, "instance_id": ctx.instance_id}
            out = yield from self.steps(ctx, program.steps, env)
            return out.value if isinstance(out, _Returned) else None

        label = program.name + (f"_{program.version}" if program.version else "")
        workflow.__name__ = workflow.__qualname__ = "".join(c if c.isalnum() else "_" for c in label)
        return workflow

    def activity(self, runner: Any, name: str) -> Callable[..., Any]:
        def activity(ctx: Any, input: Any = None):  # noqa: A002
            instance_id, task_id, teid = self.adapter.activity_ids(ctx)
            try:
                return runner.run(name=name, input=input, instance_id=instance_id, task_id=task_id,
                                  task_execution_id=teid,
                                  propagated=self.adapter.propagated(ctx) if name == "propagated" else None)
            except self.lang.A.ActivityFailure as exc:
                raise error_class(exc.error_type)(str(exc)) from None

        activity.__name__ = activity.__qualname__ = name
        return activity


class _TimedWait:
    """A wait with a timeout inside `any`, for an SDK whose wait has none: when_any([event, timer])."""

    def __init__(self, ctx: Any, step: Any, adapter: Adapter) -> None:
        self.step, self.event, self.timer = step, adapter.wait_event(ctx, step.name, None), None
        self.task = self.event
        if not self.event.is_complete:  # a buffered event wins at once: no timer, as in the reference
            self.timer = adapter.timer(ctx, timedelta(seconds=step.timeout))
            self.task = adapter.when_any([self.event, self.timer])
        self.task._taskhub_timed = self  # found again by the any step

    def result(self) -> Any:
        if self.task is not self.event and self.task.get_result() is self.timer:
            raise _timeout_error(self.step)
        return self.event.get_result()


def _bind(it: Interpreter, step: Any, env: dict[str, Any], value: Any) -> None:
    if step.as_:
        env[step.as_] = value


def _run_task(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    if isinstance(step, it.lang.P.WaitEvent) and step.timeout is not None:
        value = yield from it.wait_with_timeout(ctx, step, env)
    else:
        value = yield it.task(ctx, step, env)
    _bind(it, step, env, value)


def _run_all(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    _bind(it, step, env, (yield it.adapter.when_all([it.task(ctx, t, env) for t in step.tasks])))


def _run_any(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    children = [it.task(ctx, t, env) for t in step.tasks]
    winner = yield it.adapter.when_any(children)
    if winner.is_failed:
        raise winner.get_exception()
    timed = getattr(winner, "_taskhub_timed", None)
    result = timed.result() if timed is not None else winner.get_result()
    _bind(it, step, env, {"index": next(i for i, c in enumerate(children) if c is winner), "result": result})


def _run_branch(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    P = it.lang.P
    taken = ctx.is_patched(step.patch) if isinstance(step, P.IfPatched) else P.evaluate(step.cond, env)
    return (yield from it.steps(ctx, step.then if taken else step.else_, env))


def _run_set(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    env[step.var] = it.lang.P.evaluate(step.value, env)
    return None
    yield  # a generator like every runner


def _run_status(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    value = it.lang.P.evaluate(step.value, env)
    # A string as-is, None clears it, anything else as its text (the SDKs take a str).
    ctx.set_custom_status(value if value is None else it.lang.P.text(value))
    return None
    yield


def _run_continue(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    ctx.continue_as_new(it.lang.P.evaluate(step.input, env), save_events=step.carry_events)
    return _Returned(None)
    yield


def _run_return(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    return _Returned(it.lang.P.evaluate(step.value, env))
    yield


def _run_fail(it: Interpreter, ctx: Any, step: Any, env: dict[str, Any]) -> Iterator[Any]:
    raise error_class(step.type)(it.lang.P.text(it.lang.P.evaluate(step.message, env)))
    yield


_RUNNERS: dict[type, Callable[..., Iterator[Any]]] = {}
# Capabilities no adapter of this driver has, whatever its release: the bundle is refused, naming each step.
_NOT_DRIVEN = {"detached_spawn": "{sdk}: this driver has no spawn (a detached workflow started from workflow "
                                 "code); the Python SDK adapters map no such call"}


def _runners(P: Any) -> None:
    """Each step kind of the language and how it runs; a kind missing here is refused at start."""
    if not _RUNNERS:
        _RUNNERS.update({P.CallActivity: _run_task, P.CallChild: _run_task, P.Timer: _run_task,
                         P.WaitEvent: _run_task, P.All: _run_all, P.AnyOf: _run_any, P.IfPatched: _run_branch,
                         P.If: _run_branch, P.SetVar: _run_set, P.SetStatus: _run_status,
                         P.ContinueAsNew: _run_continue, P.Return: _run_return, P.Fail: _run_fail})


# ------------------------------------------------------------------ main


def register(rt: Any, bundle: Any, it: Interpreter, runner: Any) -> list[str]:
    registered = []
    for name, family in bundle.programs.items():
        for vname, program in family.versions.items():
            latest = family.versioned and vname == family.default
            it.adapter.add_workflow(rt, it.workflow(program), name=name, version=vname or None, latest=latest)
            registered.append(name + (f"@{vname}" if vname else "") + (" (latest)" if latest else ""))
    for name in it.lang.P.BUILTIN_ACTIVITIES:
        it.adapter.add_activity(rt, it.activity(runner, name), name=name)
    return registered


def run(make_adapter: Callable[[], Adapter], argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A Python SDK's driver: the program language run with the SDK's API.")
    ap.add_argument("--sidecar", metavar="HOST:PORT", help="the sidecar's gRPC address")
    ap.add_argument("--programs", metavar="FILE", help="program bundle (.json, or .yaml with PyYAML)")
    ap.add_argument("--ledger", default=None, help="ledger file for the record activity (default: $CONFORMANCE_LEDGER)")
    ap.add_argument("--ready-timeout", type=float, default=30.0, help="seconds to wait for the work-item stream")
    ap.add_argument("--probe", action="store_true", help="print the capabilities this SDK release lacks (JSON), exit")
    args = ap.parse_args(argv)
    adapter = make_adapter()
    tag = adapter.tag
    if args.probe:
        print(json.dumps({"sdk": adapter.sdk, "absent": adapter.absent()}), flush=True)
        return 0
    if not args.sidecar or not args.programs:
        _die(tag, EXIT_USAGE, "--sidecar HOST:PORT and --programs FILE are required (or --probe)")
    lang = Language.load(tag)
    _runners(lang.P)
    host, sep, port = args.sidecar.rpartition(":")
    if not sep or not host or not port.isdigit():
        _die(tag, EXIT_USAGE, f"--sidecar {args.sidecar!r} is not HOST:PORT")
    try:
        bundle = lang.P.load_bundle(args.programs)
    except lang.P.ProgramError as exc:
        _die(tag, EXIT_USAGE, str(exc))
    found = problems(bundle, adapter, lang)
    if found:
        for p in found:
            print(GAP_PREFIX + json.dumps(p), file=sys.stderr)
        _die(tag, EXIT_GAP, f"the bundle uses steps {adapter.sdk} cannot express (refusing to start):\n"
                            + "\n".join(f"  - {p['path']}: {p['reason']}" for p in found))

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The SDK's own log lines at INFO (its loggers are named durabletask-*, with no level of their own, so
    # WARNING): a failure's text ends with the worker's stderr, where "event buffered" or "replaying" says
    # what the executor did in that turn.
    for name in ("durabletask-worker", "durabletask-client"):
        logging.getLogger(name).setLevel(logging.INFO)
    rt = adapter.runtime(address=args.sidecar, ready_timeout=args.ready_timeout)
    it = Interpreter(adapter=adapter, lang=lang)
    registered = register(rt, bundle, it, lang.A.ActivityRunner(ledger=args.ledger))
    print(f"{tag}-driver: {adapter.sdk}; registered {', '.join(registered)}", file=sys.stderr, flush=True)
    try:
        adapter.start(rt)
    except Exception as exc:  # noqa: BLE001 - the SDKs raise RuntimeError or grpc errors here
        print(f"{tag}-driver: error: cannot connect to the sidecar at {args.sidecar}: {exc}", file=sys.stderr,
              flush=True)
        try:
            adapter.stop(rt)
        finally:  # an SDK's non-daemon run loop may keep retrying: a normal exit could hang
            sys.stdout.flush()
            os._exit(EXIT_CONNECT)
    print(f"connected to {args.sidecar}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        adapter.stop(rt)
    print(f"{tag}-driver: stopped", file=sys.stderr, flush=True)
    return 0
