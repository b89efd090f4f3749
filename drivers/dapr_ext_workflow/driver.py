"""Adapter of the Python driver (drivers/python/driver.py) for the Dapr Python SDK's workflow API.

`dapr.ext.workflow` from the dapr-ext-workflow wheel (1.18.3, pinned with `dapr` 1.18.3) or from
the `dapr` wheel itself (1.19.0 merged the extension into the core package): the same module
either way, so one adapter serves both. What a release lacks is found by probing its API:

- versions: `WorkflowRuntime.register_versioned_workflow`;
- patching: `DaprWorkflowContext.is_patched`;
- carry_events: `continue_as_new(..., save_events=)`;
- task_execution_id / teid_uuid5: the inner activity context's `task_execution_id` (without it the
  built-in activities key on the task id, docs/programs.md "Built-in activities");
- all_fails_fast: a `when_all` over two fresh tasks, one failed: dapr 1.19.0's `when_all` waits for
  every task before it fails (its docstring: "surfacing the first failure only after every task
  has finished").
- crossapp: `call_activity(..., app_id=)` / `call_child_workflow(..., app_id=)` (1.18: the action's
  router.targetAppID);
- propagation: `call_activity(..., propagation=)` with `dapr.ext.workflow.propagation.PropagationScope`
  and `WorkflowActivityContext.get_propagated_history()` (its scope and chunks give the `propagated`
  built-in's value).
- retries: `RetryPolicy` and `call_activity(..., retry_policy=)`; retry_timeout: `RetryPolicy(retry_timeout=)`;
  children: `call_child_workflow`;
- timer_origins: the release's generated `CreateTimerAction` has the `origin` oneof (before 1.18 the
  SDK ran on durabletask-dapr's proto, which has none); event_wait_timer: its timer module knows the
  optional far-future timer of an indefinite wait (`is_optional_timer_action`);
- patch_after_past goes with patching.
- A wait with a timeout uses `wait_for_external_event(name, timeout=)` where the release takes one,
  else the when_any([event, timer]) pattern of the driver.
- Releases before 1.16 call an activity or child workflow only through the registered function
  (`activity.__name__`, `_dapr_alternate_name`), never by name: the driver then passes a stand-in
  function that carries the name (`_by_name`). A release without `set_custom_status` refuses
  `set_status` steps (exit 3).

Only the public API (`dapr.ext.workflow`) runs workflows. The reaches below it:
`WorkflowActivityContext.get_inner_context().task_execution_id` (public method and property; the
wrapper does not expose the id), and the all_fails_fast probe, which builds two tasks of the SDK's
own task module outside any workflow.

    PYTHONPATH=<repo root> .sdk/dx/bin/python drivers/dapr_ext_workflow/driver.py --sidecar HOST:PORT --programs FILE
"""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from importlib import metadata
from typing import Any, Callable

from drivers.python.driver import context_absences, proto_message, takes, takes_name


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _task_module() -> Any:
    """The SDK's task module: vendored (`_durabletask`) in 1.18 and later, the durabletask package in releases that depended on it."""
    for name in ("dapr.ext.workflow._durabletask.task", "durabletask.task"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _timer_module(task: Any) -> Any:
    if task is None:
        return None
    try:
        return importlib.import_module(task.__name__.rpartition(".")[0] + ".internal.timer")
    except ImportError:
        return None


class DaprWorkflowAdapter:
    tag = "dx"

    def __init__(self) -> None:
        import dapr.ext.workflow as wf

        self.wf = wf
        ext = _version("dapr-ext-workflow")
        self.sdk = f"dapr-ext-workflow {ext}" if ext else f"dapr {_version('dapr')}"
        ctx = wf.DaprWorkflowContext
        self.wait_timeout = takes(ctx.wait_for_external_event, "timeout")
        self.custom_status = hasattr(ctx, "set_custom_status")
        self._teid = self._inner_has("task_execution_id")
        self._activity_by_name = takes_name(ctx.call_activity, "activity")
        self._child_by_name = takes_name(ctx.call_child_workflow, "workflow")

    def _inner_has(self, attribute: str) -> bool:
        if not hasattr(self.wf.WorkflowActivityContext, "get_inner_context"):
            return False
        task = _task_module()
        return task is not None and hasattr(task.ActivityContext, attribute)

    def absent(self) -> dict[str, str]:
        wf, ctx, out = self.wf, self.wf.DaprWorkflowContext, {}
        task = _task_module()
        if not hasattr(wf.WorkflowRuntime, "register_versioned_workflow"):
            out["versions"] = "WorkflowRuntime has no register_versioned_workflow"
        out.update(context_absences(ctx, api=wf, task_module=task, child="call_child_workflow"))
        if not self._teid:
            out["task_execution_id"] = out["teid_uuid5"] = "the activity context has no task_execution_id"
        if not takes(ctx.call_activity, "propagation") or not hasattr(wf.WorkflowActivityContext, "get_propagated_history"):
            out["propagation"] = "call_activity takes no propagation, or the activity context has no get_propagated_history"
        timer = proto_message(task, "CreateTimerAction")
        if timer is None or "origin" not in timer.DESCRIPTOR.oneofs_by_name:
            out["timer_origins"] = "its CreateTimerAction has no origin"
        if not hasattr(_timer_module(task), "is_optional_timer_action"):
            out["event_wait_timer"] = "an indefinite wait schedules no optional timer (no is_optional_timer_action)"
        return out

    def _by_name(self, name: str, by_name: bool) -> Any:
        """The name itself, or for a release that calls only registered functions a stand-in carrying it."""
        if by_name:
            return name

        def stand_in(*_: Any) -> None:
            raise RuntimeError(f"{name}: a stand-in for calling by name, never run")

        stand_in.__name__ = stand_in.__qualname__ = name
        stand_in._dapr_alternate_name = name  # type: ignore[attr-defined] - what these releases read
        return stand_in

    def _routing(self, app: str | None, propagation: str | None) -> dict[str, Any]:
        """Keyword arguments only where the step sets them: a release without them is never passed one."""
        out: dict[str, Any] = {}
        if app is not None:
            out["app_id"] = app
        if propagation is not None:
            from dapr.ext.workflow.propagation import PropagationScope

            out["propagation"] = {"own": PropagationScope.OWN_HISTORY, "lineage": PropagationScope.LINEAGE}[propagation]
        return out

    def propagated(self, ctx: Any) -> Any:
        history = ctx.get_propagated_history()
        if history is None:
            return None
        scope = {"OWN_HISTORY": "own", "LINEAGE": "lineage"}.get(history.scope.name, history.scope.name.lower())
        return {"scope": scope, "chunks": [{"app": w.app_id, "instance": w.instance_id, "workflow": w.name}
                                           for w in history.get_workflows()]}

    def retry_policy(self, retry: Any) -> Any:
        if retry is None:
            return None
        return self.wf.RetryPolicy(
            first_retry_interval=timedelta(seconds=retry.first_delay), max_number_of_attempts=retry.max_attempts,
            backoff_coefficient=retry.backoff,
            max_retry_interval=None if retry.max_delay is None else timedelta(seconds=retry.max_delay),
            **({} if retry.timeout is None else {"retry_timeout": timedelta(seconds=retry.timeout)}))

    def _retry(self, retry: Any) -> dict[str, Any]:
        return {} if retry is None else {"retry_policy": self.retry_policy(retry)}  # never a keyword the release lacks

    def call_activity(self, ctx: Any, name: str, input: Any, retry: Any, *, app: str | None,  # noqa: A002
                      propagation: str | None) -> Any:
        return ctx.call_activity(self._by_name(name, self._activity_by_name), input=input,
                                 **self._retry(retry), **self._routing(app, propagation))

    def call_child(self, ctx: Any, workflow: str, input: Any, instance_id: str | None, retry: Any, *,  # noqa: A002
                   app: str | None, propagation: str | None) -> Any:
        return ctx.call_child_workflow(self._by_name(workflow, self._child_by_name), input=input, instance_id=instance_id,
                                       **self._retry(retry), **self._routing(app, propagation))

    def timer(self, ctx: Any, delay: timedelta) -> Any:
        return ctx.create_timer(delay)

    def wait_event(self, ctx: Any, name: str, timeout: timedelta | None) -> Any:
        return ctx.wait_for_external_event(name, timeout=timeout) if self.wait_timeout else \
            ctx.wait_for_external_event(name)

    def when_all(self, tasks: list[Any]) -> Any:
        return self.wf.when_all(tasks)

    def when_any(self, tasks: list[Any]) -> Any:
        return self.wf.when_any(tasks)

    def activity_ids(self, ctx: Any) -> tuple[str, int, str]:
        teid = ctx.get_inner_context().task_execution_id if self._teid else ""
        return ctx.workflow_id, ctx.task_id, teid

    def runtime(self, *, address: str, ready_timeout: float) -> Any:
        host, _, port = address.rpartition(":")
        if takes(self.wf.WorkflowRuntime, "worker_ready_timeout"):
            return self.wf.WorkflowRuntime(host=host, port=port, worker_ready_timeout=ready_timeout)
        return self.wf.WorkflowRuntime(host=host, port=port)

    def add_workflow(self, rt: Any, fn: Callable[..., Any], *, name: str, version: str | None, latest: bool) -> None:
        if version is None:
            rt.register_workflow(fn, name=name)
        else:
            rt.register_versioned_workflow(fn, name=name, version_name=version, is_latest=latest)

    def add_activity(self, rt: Any, fn: Callable[..., Any], *, name: str) -> None:
        fn.__name__ = fn.__qualname__ = f"builtin_{name}"
        rt.register_activity(fn, name=name)

    def start(self, rt: Any) -> None:
        rt.start()

    def stop(self, rt: Any) -> None:
        rt.shutdown()


if __name__ == "__main__":
    from drivers.python.driver import run

    sys.exit(run(DaprWorkflowAdapter))
