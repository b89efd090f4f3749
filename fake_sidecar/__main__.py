"""`fake-sidecar` / `python -m fake_sidecar`: run the reference engine as a process."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys

from fake_sidecar.engine.store import StoreError
from taskhub_wire.limits import DEFAULT_MAX_MESSAGE_BYTES, byte_count


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 65535")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fake-sidecar",
        description="Reference Dapr-dialect TaskHubSidecarService engine (taskhub-conformance).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=4001, help="port (default 4001; 0 picks a free port)")
    p.add_argument("--db", default="./fake-sidecar.db",
                   help="SQLite file (default ./fake-sidecar.db); ':memory:' keeps nothing")
    p.add_argument("--api-token", default=os.environ.get("DAPR_API_TOKEN") or None,
                   help="require metadata 'dapr-api-token: T' on every RPC (default: env DAPR_API_TOKEN)")
    p.add_argument("--activity-lease", type=_positive_float, default=None, metavar="SECONDS",
                   help="dispatch an activity again if it is not completed within SECONDS (default: never)")
    p.add_argument("--max-payload", type=byte_count, default=None, metavar="BYTES",
                   help="stall a workflow (PAYLOAD_SIZE_EXCEEDED) whose history exceeds 95%% of BYTES")
    p.add_argument("--max-message-bytes", type=byte_count, default=DEFAULT_MAX_MESSAGE_BYTES, metavar="BYTES",
                   help="largest gRPC message received or sent (default 4194304, daprd's --max-body-size); "
                        "a workflow whose turn would not fit stalls (PAYLOAD_SIZE_EXCEEDED)")
    p.add_argument("--strict-tokens", action="store_true",
                   help="ignore completions without a completionToken, as stale ones are (default: accept them, "
                        "as durabletask-go and daprd do, for workers that lack the field)")
    p.add_argument("--clock", choices=("real", "virtual"), default="real",
                   help="virtual: when nothing is in flight, jump to the next due timer")
    p.add_argument("--task-execution-id", choices=("spec", "passthrough"), default="passthrough",
                   help="ActivityRequest.taskExecutionId: spec, a fresh id made by the sidecar on every dispatch (as "
                        "the spec says); passthrough (default), the id the SDK scheduled, as durabletask-go and daprd "
                        "send it")
    p.add_argument("--app", action="append", default=[], metavar="ID", dest="apps",
                   help="host this app id (repeat for several apps; workflows across apps, engine-rules R11.1): the "
                        "first listens on --port, each other on a port of its own, printed at start")
    p.add_argument("--late-timeout-timers", action="store_true",
                   help="keep a wait's timeout timer when its event arrives first, so its TimerFired is delivered "
                        "late, as durabletask-go's sidecar and daprd before v1.17.2 do (default: delete it, as daprd "
                        "v1.18 does; engine-rules R6.3)")
    p.add_argument("--log-level", default="WARNING", type=str.upper,
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"), help="log level on stderr (default WARNING)")
    return p


def _lift_open_files_limit() -> None:
    """Each client connection is a file descriptor: lift the soft limit to the hard one, as Go
    programs such as durabletask-go do, so a thousand workers do not exhaust a default of 1024."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
        except (ValueError, OSError):
            logging.getLogger("fake_sidecar").info("could not raise the open-files limit from %s", soft)


class _StopSignals:
    """SIGTERM and SIGINT, awaited on a socket the signal's C handler writes to.

    A handler that sets an Event is not enough: the kernel may deliver the signal to one of gRPC's threads,
    and then the main thread, blocked in the Event's lock, never wakes to run the Python handler (seen in CI:
    SIGTERM caught, the process still waiting 60 s later). The wakeup byte wakes it whichever thread took
    the signal."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for sig in _STOP_SIGNALS:
            signal.signal(sig, lambda *_: None)  # the wakeup byte does the work; the handler keeps the process alive

    def wait(self) -> None:
        while not any(b in _STOP_SIGNALS for b in self._read.recv(64)):
            pass


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _lift_open_files_limit()
    from fake_sidecar.server import SidecarServer

    try:
        server = SidecarServer.start(host=args.host, port=args.port, db=args.db, api_token=args.api_token,
                                     activity_lease=args.activity_lease, max_payload=args.max_payload,
                                     max_message_bytes=args.max_message_bytes, strict_tokens=args.strict_tokens,
                                     clock=args.clock, task_execution_id=args.task_execution_id,
                                     apps=tuple(args.apps), late_timeout_timers=args.late_timeout_timers)
    except StoreError as exc:
        print(f"fake-sidecar: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fake-sidecar: {exc}", file=sys.stderr)
        return 1
    stopping = _StopSignals()
    print(f"listening on {server.address}", flush=True)
    for app, address in server.app_addresses.items():
        print(f"app {app} on {address}", flush=True)
    stopping.wait()
    server.stop()
    # Served and stopped: the store is closed and every stream ended. Exit now rather than at the interpreter's
    # exit, which joins every thread-pool thread and so hung once (CI, load) behind a call a handler thread was
    # still in when the signal came.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
