"""A small real application on dapr-ext-workflow, in four versions, for `conformance replay`.

Runs in the SDK's own virtualenv (.sdk/dx): only the standard library and the SDK's public API.

    python dx_orders.py serve  --address HOST:PORT --version v1|v2|v2-patched|renamed
    python dx_orders.py record --address HOST:PORT --version v1 [--chain-count N --chain-length L]

`--address env` leaves the address to the SDK (DAPR_GRPC_ENDPOINT / DAPR_GRPC_PORT), as in production.
`serve` runs the worker until SIGTERM (what `conformance replay --worker-command` starts).
`record` runs the worker and a client: it starts instances, drives them to the state a capture
should see, and prints one JSON line with their ids.

Versions of the `order` workflow:
- v1: reserve, then wait for the "approve" event, then charge;
- v2: an `audit` activity added between reserve and the wait (breaks old instances);
- v2-patched: the same, guarded by is_patched("audit") (old instances keep the v1 path);
- renamed: v1 registered as "order_v2" only (old instances name a workflow that is gone);
- v3: v1's order, but `shipping` without its is_patched("fast-ship") check and `billing` only in
  version b2 (old instances of both stall).
`chain` (every version): `n` activities in sequence, for the replay-speed benchmark.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time

from datetime import timedelta

from dapr.ext.workflow import (
    DaprWorkflowClient,
    DaprWorkflowContext,
    RetryPolicy,
    WorkflowActivityContext,
    WorkflowRuntime,
    when_all,
    when_any,
)


def reserve(ctx: WorkflowActivityContext, item: str) -> str:
    return f"reserved:{item}"


def audit(ctx: WorkflowActivityContext, what: str) -> str:
    return f"audited:{what}"


def charge(ctx: WorkflowActivityContext, what: str) -> str:
    return f"charged:{what}"


def step(ctx: WorkflowActivityContext, x: int) -> int:
    return x + 1


def order_v1(ctx: DaprWorkflowContext, item: str):
    r = yield ctx.call_activity(reserve, input=item)
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("approve")
    c = yield ctx.call_activity(charge, input=r)
    return {"reserved": r, "charged": c}


def order_v2(ctx: DaprWorkflowContext, item: str):
    r = yield ctx.call_activity(reserve, input=item)
    yield ctx.call_activity(audit, input=r)
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("approve")
    c = yield ctx.call_activity(charge, input=r)
    return {"reserved": r, "charged": c}


def order_v2_patched(ctx: DaprWorkflowContext, item: str):
    r = yield ctx.call_activity(reserve, input=item)
    if ctx.is_patched("audit"):
        yield ctx.call_activity(audit, input=r)
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("approve")
    c = yield ctx.call_activity(charge, input=r)
    return {"reserved": r, "charged": c}


def shipping(ctx: DaprWorkflowContext, item: str):
    speed = "fast" if ctx.is_patched("fast-ship") else "slow"
    r = yield ctx.call_activity(reserve, input=f"{speed}:{item}")
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("go")
    return r


def shipping_unpatched(ctx: DaprWorkflowContext, item: str):
    r = yield ctx.call_activity(reserve, input=f"fast:{item}")
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("go")
    return r


def billing(ctx: DaprWorkflowContext, item: str):
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("go")
    return item


# The "zoo": one workflow per SDK feature, the same in every version; each must replay cleanly.
_flaky_attempts: dict[str, int] = {}


def flaky(ctx: WorkflowActivityContext, key: str) -> str:
    _flaky_attempts[key] = _flaky_attempts.get(key, 0) + 1
    if _flaky_attempts[key] < 3:
        raise RuntimeError(f"flaky failure #{_flaky_attempts[key]}")
    return f"ok after {_flaky_attempts[key]}"


def zoo_fan(ctx: DaprWorkflowContext, n: int):
    parts = yield when_all([ctx.call_activity(step, input=i) for i in range(n)])
    return sum(parts)


def zoo_retry(ctx: DaprWorkflowContext, key: str):
    policy = RetryPolicy(first_retry_interval=timedelta(milliseconds=100), max_number_of_attempts=3)
    return (yield ctx.call_activity(flaky, input=key, retry_policy=policy))


def zoo_child(ctx: DaprWorkflowContext, n: int):
    a = yield ctx.call_child_workflow(zoo_fan, input=n)
    b = yield ctx.call_child_workflow("chain", input=2, instance_id=f"{ctx.instance_id}-chain")
    return [a, b]


def zoo_timers(ctx: DaprWorkflowContext, _: object = None):
    yield ctx.create_timer(timedelta(milliseconds=200))
    won = yield when_any([ctx.wait_for_external_event("never"), ctx.create_timer(timedelta(milliseconds=200))])
    return "timer" if won is not None else "?"


def zoo_event_timeout(ctx: DaprWorkflowContext, _: object = None):
    try:
        got = yield ctx.wait_for_external_event("ping", timeout=timedelta(seconds=30))
    except Exception as exc:  # noqa: BLE001 - the SDK's timeout error
        got = type(exc).__name__
    ctx.set_custom_status({"got": got})
    return got


def zoo_counter(ctx: DaprWorkflowContext, n: int):
    x = yield ctx.call_activity(step, input=n)
    if x < 3:
        ctx.continue_as_new(x)
        return None
    return x


def zoo_fails(ctx: DaprWorkflowContext, _: object = None):
    yield ctx.call_activity(step, input=0)
    raise ValueError("business rule broken")


ZOO = {"zoo_fan": (zoo_fan, 4), "zoo_retry": (zoo_retry, "k"), "zoo_child": (zoo_child, 3),
       "zoo_timers": (zoo_timers, None), "zoo_event_timeout": (zoo_event_timeout, None),
       "zoo_counter": (zoo_counter, 0), "zoo_fails": (zoo_fails, None)}


def chain(ctx: DaprWorkflowContext, n: int):
    x = 0
    for _ in range(n):
        x = yield ctx.call_activity(step, input=x)
    return x


ORDERS = {"v1": ("order", order_v1), "v2": ("order", order_v2), "v2-patched": ("order", order_v2_patched),
          "renamed": ("order_v2", order_v1), "v3": ("order", order_v1)}


def runtime(address: str, version: str) -> WorkflowRuntime:
    if address == "env":  # as an app runs next to daprd: the SDK reads DAPR_GRPC_ENDPOINT / DAPR_GRPC_PORT
        wfr = WorkflowRuntime(worker_ready_timeout=15)
    else:
        host, port = address.rsplit(":", 1)
        wfr = WorkflowRuntime(host=host, port=port, worker_ready_timeout=15)
    name, fn = ORDERS[version]
    wfr.register_workflow(fn, name=name)
    wfr.register_workflow(chain, name="chain")
    # v3 drops the "fast-ship" patch check (stalls PATCH_MISMATCH) and billing's version b1
    # (stalls VERSION_NOT_AVAILABLE); every other version has both.
    wfr.register_workflow(shipping_unpatched if version == "v3" else shipping, name="shipping")
    wfr.register_versioned_workflow(billing, name="billing", version_name="b2" if version == "v3" else "b1",
                                    is_latest=True)
    for wf_name, (fn, _) in ZOO.items():
        wfr.register_workflow(fn, name=wf_name)
    for act in (reserve, audit, charge, step, flaky):
        wfr.register_activity(act, name=act.__name__)
    return wfr


def serve(args: argparse.Namespace) -> int:
    wfr = runtime(args.address, args.version)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    wfr.start()
    print("worker started", file=sys.stderr, flush=True)
    while not stop.wait(1.0):  # bounded: a signal another thread took still reaches the handler
        pass
    wfr.shutdown()
    return 0


def _wait(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def record(args: argparse.Namespace) -> int:
    wfr = runtime(args.address, args.version)
    wfr.start()
    host, port = args.address.rsplit(":", 1)
    client = DaprWorkflowClient(host=host, port=port)
    out: dict[str, list[str]] = {"completed": [], "running": [], "chain": [], "stalls": [], "zoo": []}
    try:
        if args.zoo:
            for wf_name, (_, wf_input) in ZOO.items():
                client.schedule_new_workflow(wf_name, input=wf_input, instance_id=wf_name)
                out["zoo"].append(wf_name)
            client.raise_workflow_event("zoo_event_timeout", "ping", data="pong")
            for iid in out["zoo"]:
                state = client.wait_for_workflow_completion(iid, timeout_in_seconds=120)
                if state is None or state.runtime_status.name not in ("COMPLETED", "FAILED"):
                    raise SystemExit(f"{iid} did not finish: {state}")
            out["zoo"] += ["zoo_child:0001", "zoo_child-chain"]  # the children (default id and given id)
        if args.stalls:
            for wf in ("shipping", "billing"):
                iid = f"{wf}-0"
                client.schedule_new_workflow(wf, input="item", instance_id=iid)
                if not _wait(lambda: (client.get_workflow_state(iid) or None) is not None
                             and client.get_workflow_state(iid).serialized_custom_status in ("waiting", '"waiting"')):
                    raise SystemExit(f"{iid} never reached its wait")
                out["stalls"].append(iid)
        for i in range(args.orders):
            done, waiting = f"order-done-{i}", f"order-waiting-{i}"
            for iid in (done, waiting):
                client.schedule_new_workflow("order", input=f"item-{i}", instance_id=iid)
            for iid in (done, waiting):
                ok = _wait(lambda: (client.get_workflow_state(iid) or None) is not None
                           and client.get_workflow_state(iid).serialized_custom_status in ("waiting", '"waiting"'))
                if not ok:
                    raise SystemExit(f"{iid} never reached its wait")
            client.raise_workflow_event(done, "approve", data=True)
            state = client.wait_for_workflow_completion(done, timeout_in_seconds=60)
            if state is None or state.runtime_status.name != "COMPLETED":
                raise SystemExit(f"{done} did not complete: {state}")
            out["completed"].append(done)
            out["running"].append(waiting)
        for i in range(args.chain_count):
            iid = f"chain-{i}"
            client.schedule_new_workflow("chain", input=args.chain_length, instance_id=iid)
            out["chain"].append(iid)
        for iid in out["chain"]:
            state = client.wait_for_workflow_completion(iid, timeout_in_seconds=120)
            if state is None or state.runtime_status.name != "COMPLETED":
                raise SystemExit(f"{iid} did not complete: {state}")
    finally:
        wfr.shutdown()
    print(json.dumps(out), flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(prog="dx_orders")
    p.add_argument("mode", choices=("serve", "record"))
    p.add_argument("--address", required=True)
    p.add_argument("--version", choices=sorted(ORDERS), default="v1")
    p.add_argument("--orders", type=int, default=1)
    p.add_argument("--chain-count", type=int, default=0)
    p.add_argument("--chain-length", type=int, default=32)
    p.add_argument("--stalls", action="store_true", help="also start shipping-0 and billing-0 (left running)")
    p.add_argument("--zoo", action="store_true", help="also run one workflow per SDK feature to its end")
    args = p.parse_args()
    return serve(args) if args.mode == "serve" else record(args)


if __name__ == "__main__":
    sys.exit(main())
