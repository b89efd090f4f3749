"""Run one daprd (with placement and scheduler) until interrupted, for `--sidecar daprd-address`.

    python -m conformance.targets.daprd_serve [--work-dir DIR] [--api-token T] [--max-payload BYTES]

Starts the control plane and one daprd exactly as the `daprd` target does for a scenario
(loopback ports picked free, a unique app id, its own SQLite actor store under the work dir),
prints `daprd ready at 127.0.0.1:PORT` and the log folder, and stops all three by pid on Ctrl-C
or SIGTERM. Point a run at it with
`conformance run --sidecar daprd-address --sidecar-address 127.0.0.1:PORT` (daprd's gaps and the
capabilities a shared daprd keeps; plain `--sidecar address` declares none).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from conformance.targets.daprd import DaprBinaries, DaprdNotInstalledError, DaprdSidecar, shared_control_plane


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance.targets.daprd_serve",
                                description="one daprd with placement and scheduler, until Ctrl-C")
    p.add_argument("--work-dir", type=Path, default=None,
                   help="folder for daprd's SQLite store and logs (default: a new temp folder, kept)")
    p.add_argument("--api-token", default=None, help="DAPR_API_TOKEN for daprd")
    p.add_argument("--max-payload", type=int, default=None, help="daprd --max-body-size, in bytes")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="conformance-daprd-serve-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        binaries = DaprBinaries.find()
    except DaprdNotInstalledError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = {k: v for k, v in (("api_token", args.api_token), ("max_payload", args.max_payload)) if v}
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    plane = shared_control_plane(binaries)
    try:
        sidecar = DaprdSidecar(options=options, work_dir=work_dir, binaries=binaries)
    except BaseException:
        plane.stop()
        raise
    try:
        print(f"daprd ready at {sidecar.address} (app id {sidecar.app_id}, {binaries.version or 'unknown version'})",
              flush=True)
        print(f"logs: {sidecar.dir} (daprd), {plane.root / 'logs'} (placement, scheduler); Ctrl-C stops all three",
              flush=True)
        while not stop.wait(1.0):
            if not sidecar.process.is_running():
                print(f"error: daprd exited (code {sidecar.process.returncode}); log {sidecar.process.stdout_path}",
                      file=sys.stderr)
                return 1
        return 0
    finally:
        sidecar.stop()
        plane.stop()


if __name__ == "__main__":
    raise SystemExit(main())
