"""`fake-worker` / `python -m fake_worker`: run the reference worker against a sidecar."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from taskhub_wire.limits import DEFAULT_MAX_MESSAGE_BYTES, byte_count
from fake_worker.activities import ActivityRunner
from fake_worker.adversary import Adversary, AdversaryError, load_rules
from fake_worker.client import ConnectError, Worker, WorkerOptions
from fake_worker.programs import ProgramError, load_bundle


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fake-worker",
                                description="Reference worker for TaskHubSidecarService (taskhub-conformance).")
    p.add_argument("--sidecar", required=True, metavar="HOST:PORT", help="sidecar address")
    p.add_argument("--programs", required=True, metavar="FILE", help="program bundle (YAML or JSON)")
    p.add_argument("--api-token", default=os.environ.get("DAPR_API_TOKEN") or None,
                   help="send metadata 'dapr-api-token: T' (default: env DAPR_API_TOKEN)")
    p.add_argument("--concurrency", type=int, default=8, help="work items handled at once (default 8)")
    p.add_argument("--complete-rpc", choices=("orchestrator", "workflow"), default="orchestrator",
                   help="CompleteOrchestratorTask (as the Python SDKs) or CompleteWorkflowTask (as Go)")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="give up when the sidecar cannot be reached within SECONDS (default 10)")
    p.add_argument("--max-message-bytes", type=byte_count, default=DEFAULT_MAX_MESSAGE_BYTES, metavar="BYTES",
                   help=f"largest gRPC message received or sent (default {DEFAULT_MAX_MESSAGE_BYTES}, daprd's "
                        "--max-body-size, as the reference sidecar's --max-message-bytes)")
    p.add_argument("--stateful-history", action="store_true",
                   help="announce WORKER_CAPABILITY_STATEFUL_HISTORY and take cachedHistory deltas")
    p.add_argument("--history-cache-instances", type=int, default=None, metavar="N",
                   help="with --stateful-history: keep at most N instances' histories (0: every delta misses "
                        "and is read with GetInstanceHistory)")
    p.add_argument("--adversary", metavar="RULES", help="misbehave: a JSON/YAML file or inline JSON list of rules")
    p.add_argument("--ledger", metavar="FILE", help="ledger file for the record activity (default: env CONFORMANCE_LEDGER)")
    p.add_argument("--log-level", default="WARNING", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.history_cache_instances is not None and args.history_cache_instances < 0:
        print("fake-worker: --history-cache-instances must be 0 or more", file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print("fake-worker: --concurrency must be at least 1", file=sys.stderr)
        return 2
    try:
        bundle = load_bundle(args.programs)
        rules = load_rules(args.adversary) if args.adversary else ()
    except (ProgramError, AdversaryError) as exc:
        print(f"fake-worker: {exc}", file=sys.stderr)
        return 2
    worker = Worker(bundle=bundle,
                    options=WorkerOptions(sidecar=args.sidecar, api_token=args.api_token, concurrency=args.concurrency,
                                          complete_rpc=args.complete_rpc, connect_timeout=args.connect_timeout,
                                          max_message_bytes=args.max_message_bytes,
                                          stateful_history=args.stateful_history,
                                          history_cache_instances=args.history_cache_instances),
                    activities=ActivityRunner(ledger=args.ledger), adversary=Adversary(rules=rules),
                    on_connect=lambda: print(f"connected to {args.sidecar}", flush=True))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    runner = threading.Thread(target=_run, args=(worker,), daemon=True)
    runner.start()
    while runner.is_alive():
        runner.join(0.2)
    return getattr(worker, "exit_code", 0)


def _run(worker: Worker) -> None:
    try:
        worker.run()
    except ConnectError as exc:
        print(f"fake-worker: {exc}", file=sys.stderr)
        worker.exit_code = 1  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
