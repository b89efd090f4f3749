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
- A wait with a timeout uses `wait_for_external_event(name, timeout=)` where the release takes one,
  else the when_any([event, timer]) pattern of the driver.

Only the public API (`dapr.ext.workflow`) runs workflows. The reaches below it:
`WorkflowActivityContext.get_inner_context().task_execution_id` (public method and property; the
wrapper does not expose the id), and the all_fails_fast probe, which builds two tasks of the SDK's
own task module outside any workflow.

    PYTHONPATH=<repo root> .sdk/dx/bin/python drivers/dapr_ext_workflow/driver.py --sidecar HOST:PORT --programs FILE
"""

from __future__ import annotations

import importlib
import inspect
import sys
from datetime import timedelta
from importlib import metadata
from typing import Any, Callable


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


class DaprWorkflowAdapter:
    tag = "dx"

    def __init__(self) -> None:
        import dapr.ext.workflow as wf

        self.wf = wf
        ext = _version("dapr-ext-workflow")
        self.sdk = f"dapr-ext-workflow {ext}" if ext else f"dapr {_version('dapr')}"
        self.wait_timeout = "timeout" in inspect.signature(wf.DaprWorkflowContext.wait_for_external_event).parameters
        self._teid = self._inner_has("task_execution_id")

    def _inner_has(self, attribute: str) -> bool:
        if not hasattr(self.wf.WorkflowActivityContext, "get_inner_context"):
            return False
        task = _task_module()
        return task is not None and hasattr(task.ActivityContext, attribute)

    def _fails_fast(self) -> bool | None:
        task = _task_module()
        if task is None or not hasattr(task.CompletableTask, "cancel"):
            return None  # cannot tell: the declared capability stands
        first, second = task.CompletableTask(), task.CompletableTask()
        both = self.wf.when_all([first, second])
        first.cancel(RuntimeError("probe"))
        return both.is_complete

    def absent(self) -> dict[str, str]:
        wf, out = self.wf, {}
        if not hasattr(wf.WorkflowRuntime, "register_versioned_workflow"):
            out["versions"] = "WorkflowRuntime has no register_versioned_workflow"
        if not hasattr(wf.DaprWorkflowContext, "is_patched"):
            out["patching"] = "DaprWorkflowContext has no is_patched"
        if "save_events" not in inspect.signature(wf.DaprWorkflowContext.continue_as_new).parameters:
            out["carry_events"] = "continue_as_new takes no save_events"
        if not self._teid:
            out["task_execution_id"] = out["teid_uuid5"] = "the activity context has no task_execution_id"
        if self._fails_fast() is False:
            out["all_fails_fast"] = "when_all waits for every task before it fails"
        params = inspect.signature(wf.DaprWorkflowContext.call_activity).parameters
        if "app_id" not in params:
            out["crossapp"] = "call_activity takes no app_id"
        if "propagation" not in params or not hasattr(wf.WorkflowActivityContext, "get_propagated_history"):
            out["propagation"] = "call_activity takes no propagation, or the activity context has no get_propagated_history"
        return out

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
            max_retry_interval=None if retry.max_delay is None else timedelta(seconds=retry.max_delay))

    def call_activity(self, ctx: Any, name: str, input: Any, retry: Any, *, app: str | None,  # noqa: A002
                      propagation: str | None) -> Any:
        return ctx.call_activity(name, input=input, retry_policy=self.retry_policy(retry),
                                 **self._routing(app, propagation))

    def call_child(self, ctx: Any, workflow: str, input: Any, instance_id: str | None, retry: Any, *,  # noqa: A002
                   app: str | None, propagation: str | None) -> Any:
        return ctx.call_child_workflow(workflow, input=input, instance_id=instance_id,
                                       retry_policy=self.retry_policy(retry), **self._routing(app, propagation))

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
        if "worker_ready_timeout" in inspect.signature(self.wf.WorkflowRuntime).parameters:
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
