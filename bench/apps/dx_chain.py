"""Load for bench/sidecar_throughput.py, run in the dapr-ext-workflow venv (.sdk/dx).

A dx worker with a 3-activity chain; N instances are scheduled concurrently and
awaited. Prints one JSON line: {"instances", "completed", "elapsed_s"}.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from dapr.ext.workflow import DaprWorkflowClient, DaprWorkflowContext, WorkflowActivityContext, WorkflowRuntime


def echo(ctx: WorkflowActivityContext, value: int) -> int:
    return value + 1


def chain3(ctx: DaprWorkflowContext, value: int):
    value = yield ctx.call_activity(echo, input=value)
    value = yield ctx.call_activity(echo, input=value)
    value = yield ctx.call_activity(echo, input=value)
    return value


def wait_until_accepting(client: DaprWorkflowClient, *, deadline: float) -> None:
    """daprd registers its workflow actor types only after the worker connects; until then workflow
    calls fail ("actor type ... not found"). Other engines answer at once. Not timed."""
    while True:
        try:
            client.get_workflow_state(f"bench-ready-{time.time_ns()}")
            return
        except Exception as exc:  # noqa: BLE001 - the SDK wraps grpc errors in several types
            if time.monotonic() > deadline or "not found" not in str(exc) and "DEADLINE" not in str(exc):
                raise
            time.sleep(0.1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # the SDK logs every turn at INFO
    host, port = args.address.rsplit(":", 1)
    runtime = WorkflowRuntime(host=host, port=port)
    runtime.register_workflow(chain3)
    runtime.register_activity(echo)
    runtime.start()
    client = DaprWorkflowClient(host=host, port=port)
    ids = [f"bench-{time.time_ns()}-{i}" for i in range(args.instances)]
    wait_until_accepting(client, deadline=time.monotonic() + 60)

    def one(iid: str) -> bool:
        client.schedule_new_workflow(chain3, input=0, instance_id=iid)
        state = client.wait_for_workflow_completion(iid, timeout_in_seconds=int(args.timeout))
        return state is not None and state.runtime_status.name == "COMPLETED" and state.serialized_output == "3"

    began = time.perf_counter()
    with ThreadPoolExecutor(args.clients) as pool:
        done = sum(pool.map(one, ids))
    elapsed = time.perf_counter() - began
    runtime.shutdown()
    print(json.dumps({"instances": args.instances, "completed": done, "elapsed_s": elapsed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
