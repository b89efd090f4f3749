"""Load for bench/restart_time.py, run in the dapr-ext-workflow venv (.sdk/dx).

Fills an engine's database: N instances of a workflow that starts T timers due at once and waits
for all of them (about 2T+3 history events each, no activities). Instance ids are
`restart-<i>`. Prints one JSON line: {"instances", "completed", "elapsed_s"}.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from dapr.ext.workflow import DaprWorkflowClient, DaprWorkflowContext, WorkflowRuntime, when_all


def timers(ctx: DaprWorkflowContext, count: int):
    yield when_all([ctx.create_timer(timedelta(seconds=0)) for _ in range(count)])
    return count


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--timers", type=int, default=49)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # the SDK logs every turn at INFO
    host, port = args.address.rsplit(":", 1)
    runtime = WorkflowRuntime(host=host, port=port)
    runtime.register_workflow(timers)
    runtime.start()
    client = DaprWorkflowClient(host=host, port=port)

    def one(i: int) -> bool:
        iid = f"restart-{i}"
        client.schedule_new_workflow(timers, input=args.timers, instance_id=iid)
        state = client.wait_for_workflow_completion(iid, timeout_in_seconds=int(args.timeout))
        return state is not None and state.runtime_status.name == "COMPLETED"

    began = time.perf_counter()
    with ThreadPoolExecutor(args.clients) as pool:
        done = sum(pool.map(one, range(args.instances)))
    elapsed = time.perf_counter() - began
    runtime.shutdown()
    print(json.dumps({"instances": args.instances, "completed": done, "elapsed_s": elapsed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
