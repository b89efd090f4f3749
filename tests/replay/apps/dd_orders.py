"""The order application of dx_orders.py on durabletask-dapr (the `durabletask` package), for
`conformance replay`. Runs in the SDK's own virtualenv (.sdk/dd); public API only
(TaskHubGrpcWorker, TaskHubGrpcClient, OrchestrationContext.is_patched).

    python dd_orders.py serve  --address HOST:PORT --version v1|v2|v2-patched|renamed
    python dd_orders.py record --address HOST:PORT --version v1

Versions of `order` as in dx_orders.py: v1 reserve, wait for "approve", charge; v2 an `audit`
activity after reserve; v2-patched the same behind is_patched("audit"); renamed registered as
"order_v2" only.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time

from durabletask import task
from durabletask.client import TaskHubGrpcClient
from durabletask.worker import TaskHubGrpcWorker


def reserve(ctx: task.ActivityContext, item: str) -> str:
    return f"reserved:{item}"


def audit(ctx: task.ActivityContext, what: str) -> str:
    return f"audited:{what}"


def charge(ctx: task.ActivityContext, what: str) -> str:
    return f"charged:{what}"


def order_v1(ctx: task.OrchestrationContext, item: str):
    r = yield ctx.call_activity(reserve, input=item)
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("approve")
    c = yield ctx.call_activity(charge, input=r)
    return {"reserved": r, "charged": c}


def order_v2(ctx: task.OrchestrationContext, item: str):
    r = yield ctx.call_activity(reserve, input=item)
    yield ctx.call_activity(audit, input=r)
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("approve")
    c = yield ctx.call_activity(charge, input=r)
    return {"reserved": r, "charged": c}


def order_v2_patched(ctx: task.OrchestrationContext, item: str):
    r = yield ctx.call_activity(reserve, input=item)
    if ctx.is_patched("audit"):
        yield ctx.call_activity(audit, input=r)
    ctx.set_custom_status("waiting")
    yield ctx.wait_for_external_event("approve")
    c = yield ctx.call_activity(charge, input=r)
    return {"reserved": r, "charged": c}


ORDERS = {"v1": ("order", order_v1), "v2": ("order", order_v2), "v2-patched": ("order", order_v2_patched),
          "renamed": ("order_v2", order_v1)}


def worker(address: str, version: str) -> TaskHubGrpcWorker:
    w = TaskHubGrpcWorker(host_address=address, stop_timeout=10)
    name, fn = ORDERS[version]

    def named(ctx: task.OrchestrationContext, item: str):  # add_orchestrator registers by __name__
        return fn(ctx, item)

    named.__name__ = name
    w.add_orchestrator(named)
    for act in (reserve, audit, charge):
        w.add_activity(act)
    return w


def serve(args: argparse.Namespace) -> int:
    w = worker(args.address, args.version)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    w.start()
    while not stop.wait(1.0):  # bounded: a signal another thread took still reaches the handler
        pass
    w.stop()
    return 0


def _wait(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def record(args: argparse.Namespace) -> int:
    w = worker(args.address, args.version)
    w.start()
    client = TaskHubGrpcClient(host_address=args.address)
    out: dict[str, list[str]] = {"completed": [], "running": []}
    try:
        for i in range(args.orders):
            done, waiting = f"order-done-{i}", f"order-waiting-{i}"
            for iid in (done, waiting):
                client.schedule_new_orchestration("order", input=f"item-{i}", instance_id=iid)
            for iid in (done, waiting):
                if not _wait(lambda: (client.get_orchestration_state(iid) or None) is not None
                             and client.get_orchestration_state(iid).serialized_custom_status
                             in ("waiting", '"waiting"')):
                    raise SystemExit(f"{iid} never reached its wait")
            client.raise_orchestration_event(done, "approve", data=True)
            state = client.wait_for_orchestration_completion(done, timeout=60)
            if state is None or state.runtime_status.name != "COMPLETED":
                raise SystemExit(f"{done} did not complete: {state}")
            out["completed"].append(done)
            out["running"].append(waiting)
    finally:
        w.stop()
    print(json.dumps(out), flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(prog="dd_orders")
    p.add_argument("mode", choices=("serve", "record"))
    p.add_argument("--address", required=True)
    p.add_argument("--version", choices=sorted(ORDERS), default="v1")
    p.add_argument("--orders", type=int, default=1)
    args = p.parse_args()
    return serve(args) if args.mode == "serve" else record(args)


if __name__ == "__main__":
    sys.exit(main())
