"""The `capture` and `replay` subcommands of `conformance` (added by `add_parsers`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_CONNECT_TIMEOUT_S = 60.0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    cap = sub.add_parser("capture", help="export workflow histories from a running engine to history files",
                         description="Export the histories of chosen instances (GetInstanceHistory) with their "
                                     "metadata (GetInstance) from any engine serving TaskHubSidecarService "
                                     "(daprd, durabletask-go, the reference sidecar): one JSON file per instance "
                                     "(format taskhub-conformance/history v1, docs/replay.md).")
    cap.add_argument("--from", dest="source", required=True, metavar="HOST:PORT",
                     help="the engine's gRPC address (daprd: its --dapr-grpc-port, 50001 by default)")
    cap.add_argument("--api-token", default=os.environ.get("DAPR_API_TOKEN"),
                     help="sent as dapr-api-token metadata (default: $DAPR_API_TOKEN)")
    which = cap.add_mutually_exclusive_group(required=True)
    which.add_argument("--instance", action="append", default=[], metavar="ID", help="an instance id (repeatable)")
    which.add_argument("--status", metavar="STATUS", help="every instance with this status, e.g. RUNNING")
    which.add_argument("--all", action="store_true", help="every instance (ListInstanceIDs, page by page)")
    cap.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the history files")

    rep = sub.add_parser("replay", help="replay captured histories against your worker and report nondeterminism",
                         description="Serve each recorded turn of the given histories to your worker (your real "
                                     "application, connected to the printed address as it connects to daprd) and "
                                     "check its answers against what the history recorded. Exit 0 only if every "
                                     "instance replays cleanly. Writes nothing but its report.")
    rep.add_argument("histories", nargs="*", type=Path, metavar="HISTORY",
                     help="history files, or folders of them (as `conformance capture` writes)")
    rep.add_argument("--corpus", type=Path, metavar="DIR",
                     help="replay a recorded corpus (histories/ of the library: conformance/versions/corpus.py) "
                          "against --sdk: one driver per scenario, started with that scenario's programs")
    rep.add_argument("--sdk", metavar="NAME@VERSION",
                     help="with --corpus: the SDK release to replay on (`conformance versions --list`), its "
                          "environment cached like the version matrix's")
    rep.add_argument("--any-sdk", action="store_true",
                     help="with --corpus: also the histories other SDKs recorded (default: those of --sdk's line)")
    rep.add_argument("--scenario", action="append", default=[], metavar="GLOB",
                     help="with --corpus: only the histories of scenarios whose id matches (repeatable)")
    rep.add_argument("--recorded", action="append", default=[], metavar="GLOB",
                     help="with --corpus: only the recordings whose folder <engine>-<version>/<sdk>-<version> "
                          "matches (repeatable), e.g. 'reference-*/durabletask-go-v0.14.0'")
    rep.add_argument("--worker-command", metavar="CMD",
                     help="start your worker with this command ({address} is replaced; DAPR_GRPC_ENDPOINT, "
                          "DAPR_GRPC_PORT and DAPR_RUNTIME_HOST are set to the replay sidecar); ended when done")
    rep.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                     help="where the replay sidecar listens (default 127.0.0.1:0: a free port, printed)")
    rep.add_argument("--api-token", default=None, help="require this dapr-api-token from the worker")
    rep.add_argument("--reports", type=Path, default=None, metavar="DIR",
                     help="report folder (default reports/replay/)")
    rep.add_argument("--timeout", type=float, default=30.0, metavar="S",
                     help="seconds to wait for the worker's answer to one turn (default 30)")
    rep.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT_S, metavar="S",
                     help="seconds to wait for your worker to connect (default 60)")
    rep.add_argument("--mode", choices=("fast", "turns"), default="fast",
                     help="fast (default): two whole-history requests per instance, and every recorded turn in "
                          "order only where they find something (same verdicts; docs/replay.md says when they "
                          "could differ); turns: every recorded turn of every instance")
    rep.add_argument("--jobs", type=int, default=8, help="instances replayed at once (default 8)")
    rep.add_argument("-q", "--quiet", action="store_true", help="only the summary")


def run_capture(args: argparse.Namespace) -> int:
    from conformance.replay.capture import CaptureError, Selection, capture, parse_status

    if args.status:
        try:
            parse_status(args.status)
        except ValueError as exc:
            print(f"conformance capture: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    selection = Selection(instance_ids=tuple(args.instance), status=args.status, all=args.all)
    try:
        result = capture(address=args.source, selection=selection, out_dir=args.out, api_token=args.api_token,
                         on_written=lambda p, h: print(f"{h.instance_id} ({h.name}, {h.status}, "
                                                       f"{len(h.events)} events) -> {p}"))
    except CaptureError as exc:
        print(f"conformance capture: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for iid, why in result.skipped:
        print(f"skipped {iid}: {why}", file=sys.stderr)
    print(f"{len(result.written)} history file(s) in {args.out}")
    return EXIT_FAILED if result.skipped and args.instance else EXIT_OK


def run_replay(args: argparse.Namespace) -> int:
    if args.corpus is not None or args.sdk is not None:
        from conformance.versions.cli import run_corpus_replay

        return run_corpus_replay(args)
    if not args.histories:
        print("conformance replay: give history files or folders (or --corpus DIR --sdk NAME@VERSION)", file=sys.stderr)
        return EXIT_BAD_INPUT
    from conformance.replay import report
    from conformance.replay.history import HistoryFileError, expand, load
    from conformance.replay.session import Mode, ReplayError, ReplaySidecar, WorkerProcess, replay_all

    root = Path(__file__).resolve().parents[2]
    out_dir = args.reports or (root / "reports" / "replay")
    try:
        histories = [load(p) for p in expand(args.histories)]
    except HistoryFileError as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        sidecar = ReplaySidecar.start(listen=args.listen, api_token=args.api_token, turn_timeout=args.timeout)
    except ReplayError as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    worker = WorkerProcess(command=args.worker_command, log_dir=out_dir / "worker") if args.worker_command else None
    try:
        print(f"replay sidecar listening on {sidecar.address}", flush=True)
        if worker is not None:
            worker.start(sidecar.address, api_token=args.api_token)
        else:
            print(f"waiting for your worker: point it at {sidecar.address} as it would connect to daprd "
                  f"(e.g. DAPR_GRPC_ENDPOINT={sidecar.address})", flush=True)
        alive = worker.alive if worker is not None else (lambda: True)
        sidecar.worker_alive = alive
        if not sidecar.wait_for_worker(timeout=args.connect_timeout, alive=alive):
            why = worker.describe_exit() if worker is not None and not worker.alive() else \
                f"no worker opened GetWorkItems on {sidecar.address} within {args.connect_timeout:.0f} s"
            print(f"conformance replay: {why}", file=sys.stderr)
            return EXIT_FAILED
        results = replay_all(histories, sidecar, jobs=args.jobs, mode=Mode(args.mode),
                             on_result=None if args.quiet else lambda r: print(report.terminal_line(r), flush=True))
    except ReplayError as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if worker is not None:
            worker.stop()
        sidecar.stop()
    report.print_summary(results, sys.stdout)
    written = report.write_reports(results, out_dir)
    print("reports: " + ", ".join(str(p) for p in written.values()))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED
