"""dapr-ext-workflow 1.18.3 ("dx") against a sidecar: one case per run.

Usage: <.sdk/dx python> dx_app.py --address 127.0.0.1:PORT --case NAME [--timeout S]

Uses only the SDK's public API: `dapr.ext.workflow` (WorkflowRuntime, DaprWorkflowClient,
RetryPolicy, when_all) and, for `runtime_api`, the dapr SDK's generated `DaprStub` with its
`workflow_pb2` request messages (the Dapr runtime API's workflow methods live in that module, not
in `dapr_pb2`). The one raw gRPC call is GetInstanceHistory, for inspecting stalls (the SDK client
has no history API); it is decoded with the vendored proto's HistoryEvent.

Workflow functions are built inside per-worker factories: the runtime marks a registered function
object, so "restarting a worker with other code" needs fresh function objects.
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
from dapr.ext.workflow import (
    DaprWorkflowClient,
    DaprWorkflowContext,
    RetryPolicy,
    WorkflowActivityContext,
    WorkflowRuntime,
    when_all,
)

Register = Callable[[WorkflowRuntime], None]

WAIT_S = 20  # per wait_for_* call; the app-wide watchdog is the hard limit


# --- workers and client ------------------------------------------------------------------------


@contextmanager
def worker(run: _sdkapp.CaseRun, register: Register, *, label: str) -> Iterator[WorkflowRuntime]:
    """A started WorkflowRuntime with `register` applied; shut down on exit."""
    run.step(f"start worker {label}")
    wfr = WorkflowRuntime(host=run.host, port=run.port, worker_ready_timeout=15)
    register(wfr)
    wfr.start()
    try:
        yield wfr
    finally:
        run.step(f"stop worker {label}")
        wfr.shutdown()


def client_for(run: _sdkapp.CaseRun) -> DaprWorkflowClient:
    return DaprWorkflowClient(host=run.host, port=run.port)


def status_of(client: DaprWorkflowClient, instance_id: str) -> Optional[str]:
    state = client.get_workflow_state(instance_id, fetch_payloads=False)
    return None if state is None else state.runtime_status.name


def wait_status(
    client: DaprWorkflowClient, instance_id: str, wanted: set[str], *, timeout: float = WAIT_S
) -> Optional[str]:
    return _sdkapp.poll(
        lambda: status_of(client, instance_id), until=lambda s: s in wanted, timeout=timeout
    )


def finish(client: DaprWorkflowClient, instance_id: str, details: dict[str, Any]) -> None:
    """Wait for a terminal state and record status and output."""
    state = client.wait_for_workflow_completion(instance_id, timeout_in_seconds=WAIT_S)
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
    from dapr.ext.workflow._durabletask.internal import protos  # inspection only

    return _sdkapp.history_kinds(
        address=run.address, instance_id=instance_id, parse_event=protos.HistoryEvent.FromString
    )


def _stalls(run: _sdkapp.CaseRun, instance_id: str) -> list[dict[str, Any]]:
    from dapr.ext.workflow._durabletask.internal import protos  # inspection only

    return _sdkapp.stalled_events(
        address=run.address, instance_id=instance_id, parse_event=protos.HistoryEvent.FromString
    )


# --- activities shared by the cases -------------------------------------------------------------

_attempts: dict[str, int] = {}
_attempts_lock = threading.Lock()


def register_activities(wfr: WorkflowRuntime) -> None:
    def plus_one(ctx: WorkflowActivityContext, x: int) -> int:
        return x + 1

    def square(ctx: WorkflowActivityContext, x: int) -> int:
        return x * x

    def flaky(ctx: WorkflowActivityContext, key: str) -> str:
        # Fails the first two attempts; the counter lives in this process (the only worker).
        with _attempts_lock:
            _attempts[key] = _attempts.get(key, 0) + 1
            attempt = _attempts[key]
        if attempt < 3:
            raise RuntimeError(f"flaky failure #{attempt}")
        return f"ok after {attempt} attempts"

    wfr.register_activity(plus_one, name="plus_one")
    wfr.register_activity(square, name="square")
    wfr.register_activity(flaky, name="flaky")


# --- cases ---------------------------------------------------------------------------------------


def case_chain(run: _sdkapp.CaseRun) -> bool:
    def register(wfr: WorkflowRuntime) -> None:
        register_activities(wfr)

        def chain(ctx: DaprWorkflowContext, x: int):
            values = []
            for _ in range(3):
                x = yield ctx.call_activity("plus_one", input=x)
                values.append(x)
            return values

        wfr.register_workflow(chain, name="chain")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("chain", input=10, instance_id=run.new_id())
        run.step("scheduled")
        finish(client, iid, run.details)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == [11, 12, 13]


def case_fan_out_in(run: _sdkapp.CaseRun) -> bool:
    def register(wfr: WorkflowRuntime) -> None:
        register_activities(wfr)

        def fan(ctx: DaprWorkflowContext, n: int):
            results = yield when_all([ctx.call_activity("square", input=i) for i in range(n)])
            return {"count": len(results), "sum": sum(results)}

        wfr.register_workflow(fan, name="fan_out_in")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("fan_out_in", input=20, instance_id=run.new_id())
        finish(client, iid, run.details)
    expected = {"count": 20, "sum": sum(i * i for i in range(20))}
    run.details["expected_output"] = expected
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == expected


def case_timer(run: _sdkapp.CaseRun) -> bool:
    def register(wfr: WorkflowRuntime) -> None:
        def timer_wf(ctx: DaprWorkflowContext, seconds: float):
            before = ctx.current_utc_datetime
            yield ctx.create_timer(timedelta(seconds=seconds))
            # Deterministic time of the turn that saw TimerFired.
            return (ctx.current_utc_datetime - before).total_seconds()

        wfr.register_workflow(timer_wf, name="timer")

    with worker(run, register, label="A"):
        client = client_for(run)
        started = time.monotonic()
        iid = client.schedule_new_workflow("timer", input=1.0, instance_id=run.new_id())
        finish(client, iid, run.details)
        run.details["wall_seconds"] = round(time.monotonic() - started, 3)
    out = run.details.get("output")
    return run.details.get("status") == "COMPLETED" and isinstance(out, (int, float)) and out >= 1.0


def _register_event_wf(*, timer_first: float) -> Register:
    def register(wfr: WorkflowRuntime) -> None:
        def event_wf(ctx: DaprWorkflowContext, _: Any = None):
            if timer_first:
                yield ctx.create_timer(timedelta(seconds=timer_first))
            value = yield ctx.wait_for_external_event("greet")
            return {"event": value}

        wfr.register_workflow(event_wf, name="event_wf")

    return register


def case_event_before_wait(run: _sdkapp.CaseRun) -> bool:
    # The workflow sits in a 2 s timer when the event arrives; it waits for it only afterwards.
    with worker(run, _register_event_wf(timer_first=2.0), label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("event_wf", instance_id=run.new_id())
        run.details["status_at_raise"] = status_of(client, iid)
        client.raise_workflow_event(iid, "greet", data={"when": "before"})
        run.step("raised")
        finish(client, iid, run.details)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == {
        "event": {"when": "before"}
    }


def case_event_after_wait(run: _sdkapp.CaseRun) -> bool:
    with worker(run, _register_event_wf(timer_first=0), label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("event_wf", instance_id=run.new_id())
        client.wait_for_workflow_start(iid, timeout_in_seconds=WAIT_S)
        time.sleep(0.5)  # let the turn that starts waiting commit
        run.details["status_at_raise"] = status_of(client, iid)
        client.raise_workflow_event(iid, "greet", data={"when": "after"})
        run.step("raised")
        finish(client, iid, run.details)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == {
        "event": {"when": "after"}
    }


def case_child(run: _sdkapp.CaseRun) -> bool:
    def register(wfr: WorkflowRuntime) -> None:
        register_activities(wfr)

        def parent(ctx: DaprWorkflowContext, x: int):
            result = yield ctx.call_child_workflow(
                "child_wf", input=x, instance_id=f"{ctx.instance_id}-child"
            )
            return {"child": result}

        def child_wf(ctx: DaprWorkflowContext, x: int):
            y = yield ctx.call_activity("plus_one", input=x)
            return y * 2

        wfr.register_workflow(parent, name="parent_wf")
        wfr.register_workflow(child_wf, name="child_wf")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("parent_wf", input=4, instance_id=run.new_id())
        finish(client, iid, run.details)
        child = client.get_workflow_state(f"{iid}-child")
        run.details["child_status"] = None if child is None else child.runtime_status.name
        run.details["child_output"] = None if child is None else _loads(child.serialized_output)
    return (
        run.details.get("status") == "COMPLETED"
        and run.details.get("output") == {"child": 10}
        and run.details.get("child_status") == "COMPLETED"
    )


def case_continue_as_new(run: _sdkapp.CaseRun) -> bool:
    def register(wfr: WorkflowRuntime) -> None:
        register_activities(wfr)

        def counter(ctx: DaprWorkflowContext, n: int):
            if n >= 3:
                return n
            m = yield ctx.call_activity("plus_one", input=n)
            ctx.continue_as_new(m)

        wfr.register_workflow(counter, name="counter")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("counter", input=0, instance_id=run.new_id())
        finish(client, iid, run.details)
        state = client.get_workflow_state(iid)
        run.details["final_input"] = None if state is None else _loads(state.serialized_input)
    return run.details.get("status") == "COMPLETED" and run.details.get("output") == 3


def case_retry(run: _sdkapp.CaseRun) -> bool:
    def register(wfr: WorkflowRuntime) -> None:
        register_activities(wfr)

        def retry_wf(ctx: DaprWorkflowContext, key: str):
            policy = RetryPolicy(
                first_retry_interval=timedelta(milliseconds=500), max_number_of_attempts=3
            )
            result = yield ctx.call_activity("flaky", input=key, retry_policy=policy)
            return result

        wfr.register_workflow(retry_wf, name="retry_wf")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = run.new_id()
        client.schedule_new_workflow("retry_wf", input=iid, instance_id=iid)
        finish(client, iid, run.details)
        run.details["attempts"] = _attempts.get(iid, 0)
    return run.details.get("status") == "COMPLETED" and run.details.get("attempts") == 3


def _register_wait_go(wfr: WorkflowRuntime) -> None:
    def wait_go(ctx: DaprWorkflowContext, _: Any = None):
        value = yield ctx.wait_for_external_event("go")
        return {"event": value}

    wfr.register_workflow(wait_go, name="wait_go")


def case_suspend_resume(run: _sdkapp.CaseRun) -> bool:
    d = run.details
    with worker(run, _register_wait_go, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("wait_go", instance_id=run.new_id())
        d["status_started"] = wait_status(client, iid, {"RUNNING"})
        client.pause_workflow(iid)
        run.step("paused")
        d["status_after_pause"] = wait_status(client, iid, {"SUSPENDED"})
        client.raise_workflow_event(iid, "go", data={"v": 1})
        run.step("raised while suspended")
        # The event's turn runs (the engine records the event), but the SDK buffers it while suspended.
        _sdkapp.poll(lambda: _kinds(run, iid), until=lambda kinds: "eventRaised" in kinds, timeout=WAIT_S)
        d["status_after_event_while_suspended"] = status_of(client, iid)
        client.resume_workflow(iid)
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

    def register(wfr: WorkflowRuntime) -> None:
        def term_parent(ctx: DaprWorkflowContext, _: Any = None):
            result = yield ctx.call_child_workflow(
                "term_child", instance_id=f"{ctx.instance_id}-child"
            )
            return result

        def term_child(ctx: DaprWorkflowContext, _: Any = None):
            value = yield ctx.wait_for_external_event("never")
            return value

        wfr.register_workflow(term_parent, name="term_parent")
        wfr.register_workflow(term_child, name="term_child")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("term_parent", instance_id=run.new_id())
        child_id = f"{iid}-child"
        d["child_status_before"] = wait_status(client, child_id, {"RUNNING"})
        client.terminate_workflow(iid, output="stopped", recursive=True)
        run.step("terminated")
        finish(client, iid, d)
        child = client.wait_for_workflow_completion(child_id, timeout_in_seconds=WAIT_S)
        d["child_status"] = None if child is None else child.runtime_status.name
    return d.get("status") == "TERMINATED" and d.get("child_status") == "TERMINATED"


def case_purge(run: _sdkapp.CaseRun) -> bool:
    d = run.details

    def register(wfr: WorkflowRuntime) -> None:
        register_activities(wfr)

        def purge_wf(ctx: DaprWorkflowContext, x: int):
            y = yield ctx.call_activity("plus_one", input=x)
            return y

        wfr.register_workflow(purge_wf, name="purge_wf")

    with worker(run, register, label="A"):
        client = client_for(run)
        iid = client.schedule_new_workflow("purge_wf", input=1, instance_id=run.new_id())
        finish(client, iid, d)
        client.purge_workflow(iid)
        run.step("purged")
        d["exists_after_purge"] = client.get_workflow_state(iid) is not None
    return d.get("status") == "COMPLETED" and d.get("exists_after_purge") is False


def _register_patch_wf(*, patched: bool) -> Register:
    def register(wfr: WorkflowRuntime) -> None:
        if patched:

            def patch_wf(ctx: DaprWorkflowContext, _: Any = None):
                branch = "new" if ctx.is_patched("p1") else "old"
                value = yield ctx.wait_for_external_event("go")
                return {"branch": branch, "event": value}

        else:
            # The same workflow after a deployment that dropped the patch check.
            def patch_wf(ctx: DaprWorkflowContext, _: Any = None):
                value = yield ctx.wait_for_external_event("go")
                return {"branch": "unpatched", "event": value}

        wfr.register_workflow(patch_wf, name="patch_wf")

    return register


def case_patch_stall(run: _sdkapp.CaseRun) -> bool:
    d = run.details
    client = client_for(run)
    iid = run.new_id()
    with worker(run, _register_patch_wf(patched=True), label="patched"):
        client.schedule_new_workflow("patch_wf", instance_id=iid)
        d["status_turn1"] = wait_status(client, iid, {"RUNNING"})
    with worker(run, _register_patch_wf(patched=False), label="unpatched"):
        client.raise_workflow_event(iid, "go", data="x")
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
        def versioned(ctx: DaprWorkflowContext, _: Any = None):
            value = yield ctx.wait_for_external_event("go")
            return {"version": version, "event": value}

        versioned.__name__ = f"versioned_{version}"
        return versioned

    def register(wfr: WorkflowRuntime) -> None:
        for version, latest in versions.items():
            wfr.register_versioned_workflow(
                make(version), name="versioned_wf", version_name=version, is_latest=latest
            )

    return register


def case_version_stall(run: _sdkapp.CaseRun) -> bool:
    d = run.details
    client = client_for(run)
    iid = run.new_id()
    with worker(run, _register_versions(versions={"v1": True, "v2": False}), label="v1+v2"):
        client.schedule_new_workflow("versioned_wf", instance_id=iid)
        d["status_turn1"] = wait_status(client, iid, {"RUNNING"})
    with worker(run, _register_versions(versions={"v2": True}), label="v2 only"):
        # Any new event makes a turn; the pinned v1 is missing in this worker.
        client.raise_workflow_event(iid, "poke", data="poke")
        run.step("raised poke")
        d["status_v2_only"] = wait_status(client, iid, {"STALLED"})
        d["stalls"] = _stalls(run, iid)
        try:
            client.raise_workflow_event(iid, "go", data="while-stalled")
            d["raise_while_stalled"] = "accepted"
        except grpc.RpcError as exc:
            d["raise_while_stalled"] = _sdkapp.rpc_error_text(exc)
    with worker(run, _register_versions(versions={"v1": True, "v2": False}), label="v1 again"):
        d["status_recovered"] = wait_status(client, iid, {"RUNNING"})
        client.raise_workflow_event(iid, "go", data="y")
        run.step("raised go")
        finish(client, iid, d)
    return (
        d.get("status_v2_only") == "STALLED"
        and any(s["reason"] == "VERSION_NOT_AVAILABLE" for s in d["stalls"])
        and d.get("status") == "COMPLETED"
        and d.get("output") == {"version": "v1", "event": "y"}
    )


def case_runtime_api(run: _sdkapp.CaseRun) -> bool:
    from dapr.proto.runtime.v1 import dapr_pb2_grpc, workflow_pb2

    d = run.details
    component = "dapr"

    def register(wfr: WorkflowRuntime) -> None:
        def rt_wf(ctx: DaprWorkflowContext, inp: Any = None):
            value = yield ctx.wait_for_external_event("step1")
            ctx.set_custom_status(f"got:{value}")
            yield ctx.wait_for_external_event("never")
            return inp

        wfr.register_workflow(rt_wf, name="rt_wf")

    def get(stub: dapr_pb2_grpc.DaprStub, iid: str) -> Optional[str]:
        resp = stub.GetWorkflowBeta1(
            workflow_pb2.GetWorkflowRequest(instance_id=iid, workflow_component=component),
            timeout=10,
        )
        return resp.runtime_status.upper().removeprefix("ORCHESTRATION_STATUS_")

    def wait_rt(stub: dapr_pb2_grpc.DaprStub, iid: str, wanted: str) -> Optional[str]:
        return _sdkapp.poll(lambda: get(stub, iid), until=lambda s: s == wanted, timeout=WAIT_S)

    with worker(run, register, label="A"), grpc.insecure_channel(run.address) as channel:
        stub = dapr_pb2_grpc.DaprStub(channel)
        client = client_for(run)
        iid = run.new_id()
        started = stub.StartWorkflowBeta1(
            workflow_pb2.StartWorkflowRequest(
                instance_id=iid,
                workflow_component=component,
                workflow_name="rt_wf",
                input=json.dumps({"n": 1}).encode(),
            ),
            timeout=WAIT_S,
        )
        d["start_instance_id"] = started.instance_id
        d["status_started"] = wait_rt(stub, iid, "RUNNING")
        resp = stub.GetWorkflowBeta1(
            workflow_pb2.GetWorkflowRequest(instance_id=iid, workflow_component=component)
        )
        d["get_workflow_name"] = resp.workflow_name
        stub.RaiseEventWorkflowBeta1(
            workflow_pb2.RaiseEventWorkflowRequest(
                instance_id=iid,
                workflow_component=component,
                event_name="step1",
                event_data=json.dumps("hello").encode(),
            ),
            timeout=10,
        )
        run.step("raised step1")
        state = _sdkapp.poll(
            lambda: client.get_workflow_state(iid),
            until=lambda s: s is not None and s.serialized_custom_status is not None,
            timeout=WAIT_S,
        )
        # set_custom_status takes a str and sends it verbatim (not JSON-encoded).
        d["custom_status"] = None if state is None else state.serialized_custom_status
        resp = stub.GetWorkflowBeta1(
            workflow_pb2.GetWorkflowRequest(instance_id=iid, workflow_component=component)
        )
        d["properties"] = dict(resp.properties)
        stub.PauseWorkflowBeta1(
            workflow_pb2.PauseWorkflowRequest(instance_id=iid, workflow_component=component),
            timeout=WAIT_S,
        )
        d["status_paused"] = wait_rt(stub, iid, "SUSPENDED")
        stub.ResumeWorkflowBeta1(
            workflow_pb2.ResumeWorkflowRequest(instance_id=iid, workflow_component=component),
            timeout=WAIT_S,
        )
        d["status_resumed"] = wait_rt(stub, iid, "RUNNING")
        stub.TerminateWorkflowBeta1(
            workflow_pb2.TerminateWorkflowRequest(instance_id=iid, workflow_component=component),
            timeout=WAIT_S,
        )
        d["status_terminated"] = wait_rt(stub, iid, "TERMINATED")
        stub.PurgeWorkflowBeta1(
            workflow_pb2.PurgeWorkflowRequest(instance_id=iid, workflow_component=component),
            timeout=WAIT_S,
        )
        run.step("purged")
        try:
            d["get_after_purge"] = f"OK: {get(stub, iid)}"
        except grpc.RpcError as exc:
            d["get_after_purge"] = _sdkapp.rpc_error_text(exc)
        d["sdk_client_exists_after_purge"] = client.get_workflow_state(iid) is not None
    return (
        d.get("start_instance_id") == iid
        and d.get("status_started") == "RUNNING"
        and d.get("custom_status") == "got:hello"
        and d.get("status_paused") == "SUSPENDED"
        and d.get("status_resumed") == "RUNNING"
        and d.get("status_terminated") == "TERMINATED"
        and not str(d.get("get_after_purge", "")).startswith("OK")
        and d.get("sdk_client_exists_after_purge") is False
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
    "runtime_api": case_runtime_api,
}


if __name__ == "__main__":
    _sdkapp.main(sdk="dx", cases=CASES)
