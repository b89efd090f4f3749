"""durabletask-dapr 0.17.4 ("dd") against a sidecar: one case per run.

Usage: <.sdk/dd python> dd_app.py --address 127.0.0.1:PORT --case NAME [--timeout S]

Uses the SDK's public API: `durabletask.worker.TaskHubGrpcWorker`, `durabletask.client.
TaskHubGrpcClient` and `durabletask.task` (RetryPolicy, when_all, is_patched). Two exceptions, both
marked where they occur:
- named versions: dd 0.17.4 resolves them in its worker (`_Registry.get_orchestrator`) but has no
  public registration method, so `version_stall` registers through `worker._registry`, exactly the
  call dapr-ext-workflow's `register_versioned_workflow` makes;
- stall inspection: a raw GetInstanceHistory call (dd's proto has no such RPC), decoded with dd's
  own HistoryEvent class.

The Dapr runtime API (`runtime_api`) is not part of this SDK; that case exists only in dx_app.py.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Callable, Iterator, Optional

import _sdkapp  # the script's own folder is on sys.path
import grpc
from durabletask import task
from durabletask.client import TaskHubGrpcClient
from durabletask.worker import TaskHubGrpcWorker

Register = Callable[[TaskHubGrpcWorker], None]

WAIT_S = 20  # per wait_for_* call; the app-wide watchdog is the hard limit


# --- workers and client ------------------------------------------------------------------------


@contextmanager
def worker(run: _sdkapp.CaseRun, register: Register, *, label: str) -> Iterator[TaskHubGrpcWorker]:
    """A started TaskHubGrpcWorker with `register` applied; stopped on exit."""
    run.step(f"start worker {label}")
    w = TaskHubGrpcWorker(host_address=run.address, stop_timeout=10)
    register(w)
    w.start()
    try:
        yield w
    finally:
        run.step(f"stop worker {label}")
        w.stop()


def client_for(run: _sdkapp.CaseRun) -> TaskHubGrpcClient:
    return TaskHubGrpcClient(host_address=run.address)


def status_of(client: TaskHubGrpcClient, instance_id: str) -> Optional[str]:
    state = client.get_orchestration_state(instance_id, fetch_payloads=False)
    return None if state is None else state.runtime_status.name


def wait_status(
    client: TaskHubGrpcClient, instance_id: str, wanted: set[str], *, timeout: float = WAIT_S
) -> Optional[str]:
    return _sdkapp.poll(
        lambda: status_of(client, instance_id), until=lambda s: s in wanted, timeout=timeout
    )


def finish(client: TaskHubGrpcClient, instance_id: str, details: dict[str, Any]) -> None:
    """Wait for a terminal state and record status and output."""
    state = client.wait_for_orchestration_completion(instance_id, timeout=WAIT_S)
    if state is None:
        details["status"] = None
        return
    details["status"] = state.runtime_status.name
    details["output"] = _loads(state.serialized_output)
    if state.failure_details is not None:
        details["failure"] = {
            "type": state.failure_details.error_type,
            "message": state.failure_details.message,
        }


def _loads(text: Optional[str]) -> Any:
    return None if text in (None, "") else json.loads(text)


def _kinds(run: _sdkapp.CaseRun, instance_id: str) -> list[str]:
    import durabletask.internal.orchestrator_service_pb2 as pb  # inspection only

    return _sdkapp.history_kinds(address=run.address, instance_id=instance_id, parse_event=pb.HistoryEvent.FromString)


def _stalls(run: _sdkapp.CaseRun, instance_id: str) -> list[dict[str, Any]]:
    import durabletask.internal.orchestrator_service_pb2 as pb  # inspection only

    return _sdkapp.stalled_events(
        address=run.address, instance_id=instance_id, parse_event=pb.HistoryEvent.FromString
    )


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    # dd registers orchestrators and activities under fn.__name__.
    fn.__name__ = name
    return fn


# --- activities shared by the cases -------------------------------------------------------------

_attempts: dict[str, int] = {}
_attempts_lock = threading.Lock()


def register_activities(w: TaskHubGrpcWorker) -> None:
    def plus_one(ctx: task.ActivityContext, x: int) -> int:
        return x + 1

    def square(ctx: task.ActivityContext, x: int) -> int:
        return x * x

    def flaky(ctx: task.ActivityContext, key: str) -> str:
        # Fails the first two attempts; the counter lives in this process (the only worker).
        with _attempts_lock:
            _attempts[key] = _attempts.get(key, 0) + 1
            attempt = _attempts[key]
        if attempt < 3:
            raise RuntimeError(f"flaky failure #{attempt}")
        return f"ok after {attempt} attempts"

    for fn in (plus_one, square, flaky):
        w.add_activity(fn)


# --- cases ---------------------------------------------------------------------------------------


def case_chain(run: _sdkapp.CaseRun) -> bool:
    def register(w: TaskHubGrpcWorker) -> None:
        register_activities(w)

        def chain(ctx: task.OrchestrationContext, x: int):
            values = []
            for _ in range(3):
                x = yield ctx.call_activity("plus_one", input=x)
                values.append(x)
            return values

        w.add_orchestrator(chain)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("chain", input=10, instance_id=run.new_id())
        run.step("scheduled")
        finish(client, iid, run.details)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == [11, 12, 13]


def case_fan_out_in(run: _sdkapp.CaseRun) -> bool:
    def register(w: TaskHubGrpcWorker) -> None:
        register_activities(w)

        def fan_out_in(ctx: task.OrchestrationContext, n: int):
            results = yield task.when_all([ctx.call_activity("square", input=i) for i in range(n)])
            return {"count": len(results), "sum": sum(results)}

        w.add_orchestrator(fan_out_in)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("fan_out_in", input=20, instance_id=run.new_id())
        finish(client, iid, run.details)
    expected = {"count": 20, "sum": sum(i * i for i in range(20))}
    run.details["expected_output"] = expected
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == expected


def case_timer(run: _sdkapp.CaseRun) -> bool:
    def register(w: TaskHubGrpcWorker) -> None:
        def timer(ctx: task.OrchestrationContext, seconds: float):
            before = ctx.current_utc_datetime
            yield ctx.create_timer(timedelta(seconds=seconds))
            # Deterministic time of the turn that saw TimerFired.
            return (ctx.current_utc_datetime - before).total_seconds()

        w.add_orchestrator(timer)

    with worker(run, register, label="A"):
        client = client_for(run)
        started = time.monotonic()
        iid = client.schedule_new_orchestration("timer", input=1.0, instance_id=run.new_id())
        finish(client, iid, run.details)
        run.details["wall_seconds"] = round(time.monotonic() - started, 3)
    out = run.details.get("output")
    return run.details.get("status") == "COMPLETED" and isinstance(out, (int, float)) and out >= 1.0


def _register_event_wf(*, timer_first: float) -> Register:
    def register(w: TaskHubGrpcWorker) -> None:
        def event_wf(ctx: task.OrchestrationContext, _: Any = None):
            if timer_first:
                yield ctx.create_timer(timedelta(seconds=timer_first))
            value = yield ctx.wait_for_external_event("greet")
            return {"event": value}

        w.add_orchestrator(event_wf)

    return register


def case_event_before_wait(run: _sdkapp.CaseRun) -> bool:
    # The workflow sits in a 2 s timer when the event arrives; it waits for it only afterwards.
    with worker(run, _register_event_wf(timer_first=2.0), label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("event_wf", instance_id=run.new_id())
        run.details["status_at_raise"] = status_of(client, iid)
        client.raise_orchestration_event(iid, "greet", data={"when": "before"})
        run.step("raised")
        finish(client, iid, run.details)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == {
        "event": {"when": "before"}
    }


def case_event_after_wait(run: _sdkapp.CaseRun) -> bool:
    with worker(run, _register_event_wf(timer_first=0), label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("event_wf", instance_id=run.new_id())
        client.wait_for_orchestration_start(iid, timeout=WAIT_S)
        time.sleep(0.5)  # let the turn that starts waiting commit
        run.details["status_at_raise"] = status_of(client, iid)
        client.raise_orchestration_event(iid, "greet", data={"when": "after"})
        run.step("raised")
        finish(client, iid, run.details)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == {
        "event": {"when": "after"}
    }


def case_child(run: _sdkapp.CaseRun) -> bool:
    def register(w: TaskHubGrpcWorker) -> None:
        register_activities(w)

        def parent_wf(ctx: task.OrchestrationContext, x: int):
            result = yield ctx.call_sub_orchestrator(
                "child_wf", input=x, instance_id=f"{ctx.instance_id}-child"
            )
            return {"child": result}

        def child_wf(ctx: task.OrchestrationContext, x: int):
            y = yield ctx.call_activity("plus_one", input=x)
            return y * 2

        w.add_orchestrator(parent_wf)
        w.add_orchestrator(child_wf)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("parent_wf", input=4, instance_id=run.new_id())
        finish(client, iid, run.details)
        child = client.get_orchestration_state(f"{iid}-child")
        run.details["child_status"] = None if child is None else child.runtime_status.name
        run.details["child_output"] = None if child is None else _loads(child.serialized_output)
    return (
        run.details.get("status") == "COMPLETED"
        and run.details.get("output") == {"child": 10}
        and run.details.get("child_status") == "COMPLETED"
    )


def case_continue_as_new(run: _sdkapp.CaseRun) -> bool:
    def register(w: TaskHubGrpcWorker) -> None:
        register_activities(w)

        def counter(ctx: task.OrchestrationContext, n: int):
            if n >= 3:
                return n
            m = yield ctx.call_activity("plus_one", input=n)
            ctx.continue_as_new(m)

        w.add_orchestrator(counter)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("counter", input=0, instance_id=run.new_id())
        finish(client, iid, run.details)
        state = client.get_orchestration_state(iid)
        run.details["final_input"] = None if state is None else _loads(state.serialized_input)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == 3


def case_retry(run: _sdkapp.CaseRun) -> bool:
    def register(w: TaskHubGrpcWorker) -> None:
        register_activities(w)

        def retry_wf(ctx: task.OrchestrationContext, key: str):
            policy = task.RetryPolicy(
                first_retry_interval=timedelta(milliseconds=500), max_number_of_attempts=3
            )
            result = yield ctx.call_activity("flaky", input=key, retry_policy=policy)
            return result

        w.add_orchestrator(retry_wf)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = run.new_id()
        client.schedule_new_orchestration("retry_wf", input=iid, instance_id=iid)
        finish(client, iid, run.details)
        run.details["attempts"] = _attempts.get(iid, 0)
    return run.details.get("status") == "COMPLETED" and run.details.get("attempts") == 3


def _register_wait_go(w: TaskHubGrpcWorker) -> None:
    def wait_go(ctx: task.OrchestrationContext, _: Any = None):
        value = yield ctx.wait_for_external_event("go")
        return {"event": value}

    w.add_orchestrator(wait_go)


def case_suspend_resume(run: _sdkapp.CaseRun) -> bool:
    d = run.details
    with worker(run, _register_wait_go, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("wait_go", instance_id=run.new_id())
        d["status_started"] = wait_status(client, iid, {"RUNNING"})
        client.suspend_orchestration(iid)
        run.step("suspended")
        d["status_after_pause"] = wait_status(client, iid, {"SUSPENDED"})
        client.raise_orchestration_event(iid, "go", data={"v": 1})
        run.step("raised while suspended")
        # The event's turn runs (the engine records the event), but the SDK buffers it while suspended.
        _sdkapp.poll(lambda: _kinds(run, iid), until=lambda kinds: "eventRaised" in kinds, timeout=WAIT_S)
        d["status_after_event_while_suspended"] = status_of(client, iid)
        client.resume_orchestration(iid)
        run.step("resumed")
        finish(client, iid, d)
    return (
        d.get("status_after_pause") == "SUSPENDED"
        and d.get("status_after_event_while_suspended") == "SUSPENDED"
        and d.get("status") == "COMPLETED"
        and d.get("output") == {"event": {"v": 1}}
    )


def case_terminate_recursive(run: _sdkapp.CaseRun) -> bool:
    d = run.details

    def register(w: TaskHubGrpcWorker) -> None:
        def term_parent(ctx: task.OrchestrationContext, _: Any = None):
            result = yield ctx.call_sub_orchestrator(
                "term_child", instance_id=f"{ctx.instance_id}-child"
            )
            return result

        def term_child(ctx: task.OrchestrationContext, _: Any = None):
            value = yield ctx.wait_for_external_event("never")
            return value

        w.add_orchestrator(term_parent)
        w.add_orchestrator(term_child)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("term_parent", instance_id=run.new_id())
        child_id = f"{iid}-child"
        d["child_status_before"] = wait_status(client, child_id, {"RUNNING"})
        client.terminate_orchestration(iid, output="stopped", recursive=True)
        run.step("terminated")
        finish(client, iid, d)
        child = client.wait_for_orchestration_completion(child_id, timeout=WAIT_S)
        d["child_status"] = None if child is None else child.runtime_status.name
    return d.get("status") == "TERMINATED" and d.get("child_status") == "TERMINATED"


def case_purge(run: _sdkapp.CaseRun) -> bool:
    d = run.details

    def register(w: TaskHubGrpcWorker) -> None:
        register_activities(w)

        def purge_wf(ctx: task.OrchestrationContext, x: int):
            y = yield ctx.call_activity("plus_one", input=x)
            return y

        w.add_orchestrator(purge_wf)

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_orchestration("purge_wf", input=1, instance_id=run.new_id())
        finish(client, iid, d)
        client.purge_orchestration(iid)
        run.step("purged")
        d["exists_after_purge"] = client.get_orchestration_state(iid) is not None
    return d.get("status") == "COMPLETED" and d.get("exists_after_purge") is False


def _register_patch_wf(*, patched: bool) -> Register:
    def register(w: TaskHubGrpcWorker) -> None:
        if patched:

            def patch_wf(ctx: task.OrchestrationContext, _: Any = None):
                branch = "new" if ctx.is_patched("p1") else "old"
                value = yield ctx.wait_for_external_event("go")
                return {"branch": branch, "event": value}

        else:
            # The same workflow after a deployment that dropped the patch check.
            def patch_wf(ctx: task.OrchestrationContext, _: Any = None):
                value = yield ctx.wait_for_external_event("go")
                return {"branch": "unpatched", "event": value}

        w.add_orchestrator(patch_wf)

    return register


def case_patch_stall(run: _sdkapp.CaseRun) -> bool:
    d = run.details
    client = client_for(run)
    iid = run.new_id()
    with worker(run, _register_patch_wf(patched=True), label="patched"):
        client.schedule_new_orchestration("patch_wf", instance_id=iid)
        d["status_turn1"] = wait_status(client, iid, {"RUNNING"})
    with worker(run, _register_patch_wf(patched=False), label="unpatched"):
        client.raise_orchestration_event(iid, "go", data="x")
        run.step("raised go")
        d["status_unpatched"] = wait_status(client, iid, {"STALLED"})
        d["stalls"] = _stalls(run, iid)
    with worker(run, _register_patch_wf(patched=True), label="patched again"):
        finish(client, iid, d)
    d["stalls_after"] = _stalls(run, iid)
    return (
        d.get("status_unpatched") == "STALLED"
        and any(s["reason"] == "PATCH_MISMATCH" for s in d["stalls"])
        and d.get("status") == "COMPLETED"
        and d.get("output") == {"branch": "new", "event": "x"}
    )


def _register_versions(*, versions: dict[str, bool]) -> Register:
    """Register named versions of `versioned_wf`; the dict maps version name -> is_latest."""

    def make(version: str) -> Callable[..., Any]:
        def versioned(ctx: task.OrchestrationContext, _: Any = None):
            value = yield ctx.wait_for_external_event("go")
            return {"version": version, "event": value}

        return _named(versioned, f"versioned_{version}")

    def register(w: TaskHubGrpcWorker) -> None:
        for version, latest in versions.items():
            # Not public in dd 0.17.4 (see the module docstring); the worker resolves it publicly.
            w._registry.add_named_orchestrator(
                "versioned_wf", make(version), version_name=version, is_latest=latest
            )

    return register


def case_version_stall(run: _sdkapp.CaseRun) -> bool:
    d = run.details
    client = client_for(run)
    iid = run.new_id()
    with worker(run, _register_versions(versions={"v1": True, "v2": False}), label="v1+v2"):
        client.schedule_new_orchestration("versioned_wf", instance_id=iid)
        d["status_turn1"] = wait_status(client, iid, {"RUNNING"})
    with worker(run, _register_versions(versions={"v2": True}), label="v2 only"):
        # Any new event makes a turn; the pinned v1 is missing in this worker.
        client.raise_orchestration_event(iid, "poke", data="poke")
        run.step("raised poke")
        d["status_v2_only"] = wait_status(client, iid, {"STALLED"})
        d["stalls"] = _stalls(run, iid)
        try:
            client.raise_orchestration_event(iid, "go", data="while-stalled")
            d["raise_while_stalled"] = "accepted"
        except grpc.RpcError as exc:
            d["raise_while_stalled"] = _sdkapp.rpc_error_text(exc)
    with worker(run, _register_versions(versions={"v1": True, "v2": False}), label="v1 again"):
        d["status_recovered"] = wait_status(client, iid, {"RUNNING"})
        client.raise_orchestration_event(iid, "go", data="y")
        run.step("raised go")
        finish(client, iid, d)
    return (
        d.get("status_v2_only") == "STALLED"
        and any(s["reason"] == "VERSION_NOT_AVAILABLE" for s in d["stalls"])
        and d.get("status") == "COMPLETED"
        and d.get("output") == {"version": "v1", "event": "y"}
    )


CASES: dict[str, _sdkapp.CaseFn] = {
    "chain": case_chain,
    "fan_out_in": case_fan_out_in,
    "timer": case_timer,
    "event_before_wait": case_event_before_wait,
    "event_after_wait": case_event_after_wait,
    "child": case_child,
    "continue_as_new": case_continue_as_new,
    "retry": case_retry,
    "suspend_resume": case_suspend_resume,
    "terminate_recursive": case_terminate_recursive,
    "purge": case_purge,
    "patch_stall": case_patch_stall,
    "version_stall": case_version_stall,
}


if __name__ == "__main__":
    _sdkapp.main(sdk="dd", cases=CASES)
