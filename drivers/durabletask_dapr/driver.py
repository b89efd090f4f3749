"""Adapter of the Python driver (drivers/python/driver.py) for durabletask-dapr ("dd").

Its top-level package is `durabletask` (the same name as Microsoft's durabletask, hence a
virtualenv of its own, scripts/install-sdks.sh dd). How the steps map onto dd (README.md):

- A wait with a timeout: dd's `wait_for_external_event(name)` takes none, so the driver uses the
  pattern of dd's own README ("Human interaction and durable timers"),
  `when_any([event, create_timer(timeout)])` (drivers/python/driver.py; a timed wait inside `all`,
  and `timeout: 0` inside `any`, are refused with exit 3).
- Named versions: `TaskHubGrpcWorker` has no public method to register one; the driver registers
  through `worker._registry.add_named_orchestrator(name, fn, version_name=..., is_latest=...)`,
  exactly the call dapr-ext-workflow's public `register_versioned_workflow` makes on the same
  registry class. This is the one reach below dd's public API; a release without it lacks `versions`.
- DAPR_API_TOKEN: dd does not read it itself; as a dd application would, the driver passes it as
  gRPC metadata `dapr-api-token` (the worker's public `metadata=` argument) when it is set.

What a release lacks is probed as for dapr-ext-workflow (drivers/dapr_ext_workflow/driver.py), with
the helpers of drivers/python/driver.py; keywords a release does not take (`stop_timeout` before
0.17, `retry_policy` or `app_id` where absent) are never passed.

    PYTHONPATH=<repo root> .sdk/dd/bin/python drivers/durabletask_dapr/driver.py --sidecar HOST:PORT --programs FILE
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from importlib import metadata
from typing import Any, Callable

from drivers.python.driver import context_absences, takes


class DurableTaskDaprAdapter:
    tag = "dd"

    def __init__(self) -> None:
        from durabletask import task, worker

        self.task, self.worker = task, worker
        self.sdk = f"durabletask-dapr {metadata.version('durabletask-dapr')}"
        ctx = task.OrchestrationContext
        self.wait_timeout = takes(ctx.wait_for_external_event, "timeout")
        self.custom_status = hasattr(ctx, "set_custom_status")

    def absent(self) -> dict[str, str]:
        task, ctx, out = self.task, self.task.OrchestrationContext, {}
        named = getattr(getattr(self.worker, "_Registry", None), "add_named_orchestrator", None)
        if named is None or not takes(named, "version_name") or not takes(named, "is_latest"):
            out["versions"] = "the worker's registry has no add_named_orchestrator(version_name=, is_latest=)"
        out.update(context_absences(ctx, api=task, task_module=task, child="call_sub_orchestrator"))
        if not hasattr(task.ActivityContext, "task_execution_id"):
            out["task_execution_id"] = out["teid_uuid5"] = "the activity context has no task_execution_id"
        return out

    def retry_policy(self, retry: Any) -> Any:
        if retry is None:
            return None
        return self.task.RetryPolicy(
            first_retry_interval=timedelta(seconds=retry.first_delay), max_number_of_attempts=retry.max_attempts,
            backoff_coefficient=retry.backoff,
            max_retry_interval=None if retry.max_delay is None else timedelta(seconds=retry.max_delay),
            **({} if retry.timeout is None else {"retry_timeout": timedelta(seconds=retry.timeout)}))

    def _extra(self, retry: Any, app: str | None) -> dict[str, Any]:
        """Only the keywords the step sets: a release without them is never passed one."""
        out: dict[str, Any] = {} if retry is None else {"retry_policy": self.retry_policy(retry)}
        if app is not None:
            out["app_id"] = app
        return out

    def call_activity(self, ctx: Any, name: str, input: Any, retry: Any, *, app: str | None,  # noqa: A002
                      propagation: str | None) -> Any:
        # `propagation` never arrives: the target does not declare it (0.17.4's call_activity has no
        # propagation scope and its activity context no received history).
        return ctx.call_activity(name, input=input, **self._extra(retry, app))

    def call_child(self, ctx: Any, workflow: str, input: Any, instance_id: str | None, retry: Any, *,  # noqa: A002
                   app: str | None, propagation: str | None) -> Any:
        return ctx.call_sub_orchestrator(workflow, input=input, instance_id=instance_id, **self._extra(retry, app))

    def propagated(self, ctx: Any) -> Any:
        return None  # never asked: the target does not declare propagation

    def timer(self, ctx: Any, delay: timedelta) -> Any:
        return ctx.create_timer(delay)

    def wait_event(self, ctx: Any, name: str, timeout: timedelta | None) -> Any:
        return ctx.wait_for_external_event(name, timeout=timeout) if self.wait_timeout else \
            ctx.wait_for_external_event(name)

    def when_all(self, tasks: list[Any]) -> Any:
        return self.task.when_all(tasks)

    def when_any(self, tasks: list[Any]) -> Any:
        return self.task.when_any(tasks)

    def activity_ids(self, ctx: Any) -> tuple[str, int, str]:
        return ctx.orchestration_id, ctx.task_id, getattr(ctx, "task_execution_id", "")

    def runtime(self, *, address: str, ready_timeout: float) -> Any:
        token = os.environ.get("DAPR_API_TOKEN")
        # stop_timeout: a quick stop where the release takes one (0.17 and later).
        quick = {"stop_timeout": 5.0} if takes(self.worker.TaskHubGrpcWorker, "stop_timeout") else {}
        return self.worker.TaskHubGrpcWorker(host_address=address, metadata=[("dapr-api-token", token)] if token else None,
                                             **quick)

    def add_workflow(self, rt: Any, fn: Callable[..., Any], *, name: str, version: str | None, latest: bool) -> None:
        fn.__name__ = fn.__qualname__ = name  # dd names an orchestrator by fn.__name__ (task.get_name)
        if version is None:
            rt.add_orchestrator(fn)
        else:  # no public method (module docstring)
            rt._registry.add_named_orchestrator(name, fn, version_name=version, is_latest=latest)

    def add_activity(self, rt: Any, fn: Callable[..., Any], *, name: str) -> None:
        rt.add_activity(fn)  # under fn.__name__, which is the activity's name

    def start(self, rt: Any) -> None:
        rt.start()  # returns once the GetWorkItems stream is open; RuntimeError after 10 s

    def stop(self, rt: Any) -> None:
        rt.stop()


if __name__ == "__main__":
    from drivers.python.driver import run

    sys.exit(run(DurableTaskDaprAdapter))
