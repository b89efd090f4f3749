"""Stream flood: Hello and GetInstance latency while N idle GetWorkItems streams are open.

Each engine runs as its own process on loopback; one client channel opens N GetWorkItems streams
that never receive anything, then a second channel times Hello and GetInstance (CALLS each).
Engines: the reference sidecar (grpc.aio edge) and durabletask-go, side by side.

    ./dev bench stream_flood [--streams 1000] [--calls 200]

Prints p50/p99/max latency per RPC and engine. The target (issue 11) is an answer within 100 ms
with 1,000 idle streams.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from google.protobuf import empty_pb2  # noqa: E402

from conformance.targets.durabletask_go import DurableTaskGoNotInstalledError, DurableTaskGoSidecar  # noqa: E402
from conformance.targets.process import ManagedProcess, ProcessSpec  # noqa: E402
from taskhub_wire import pb  # noqa: E402
from taskhub_wire.rpc import TaskHubClient  # noqa: E402


class _Ours:
    def __init__(self, log_dir: Path) -> None:
        self.proc = ManagedProcess.start(spec=ProcessSpec(
            name="fake-sidecar", argv=(sys.executable, "-m", "fake_sidecar", "--port", "0", "--db", ":memory:"),
            log_dir=log_dir, cwd=ROOT))
        self.address = self.proc.wait_for_line(r"^listening on (\S+)", timeout=30).group(1)

    def stop(self) -> None:
        self.proc.stop()


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered) * 1e3:7.1f} {p99 * 1e3:7.1f} {ordered[-1] * 1e3:7.1f}"


def measure(address: str, streams: int, calls: int) -> dict[str, list[float]]:
    flood = grpc.insecure_channel(address)
    channel = grpc.insecure_channel(address)
    client = TaskHubClient(channel)
    client.call("Hello", empty_pb2.Empty(), timeout=30, wait_for_ready=True)
    open_stream = flood.unary_stream("/TaskHubSidecarService/GetWorkItems")
    opened = [open_stream(pb.GetWorkItemsRequest().SerializeToString()) for _ in range(streams)]
    try:
        time.sleep(2.0)  # let every stream reach the server before timing anything
        out: dict[str, list[float]] = {"Hello": [], "GetInstance": []}
        for _ in range(calls):
            for name, req in (("Hello", empty_pb2.Empty()), ("GetInstance", pb.GetInstanceRequest(instanceId="x"))):
                t0 = time.perf_counter()
                try:
                    client.call(name, req, timeout=10)
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.NOT_FOUND:  # durabletask-go: unknown instance
                        raise
                out[name].append(time.perf_counter() - t0)
        return out
    finally:
        for call in opened:
            call.cancel()
        flood.close()
        channel.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    rows: list[tuple[str, str, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        log_dir = Path(tmp)
        engines = [("reference", lambda: _Ours(log_dir)),
                   ("durabletask-go", lambda: DurableTaskGoSidecar().start(log_dir=log_dir))]
        for label, start in engines:
            try:
                server = start()
            except DurableTaskGoNotInstalledError as exc:
                print(f"bench: skipping {label}: {exc}", file=sys.stderr)
                continue
            try:
                for name, samples in measure(server.address, args.streams, args.calls).items():
                    rows.append((label, name, samples))
            finally:
                server.stop()
    print(f"\n{args.streams} idle GetWorkItems streams open; {args.calls} calls each, latency in ms\n")
    print(f"{'engine':<16} {'rpc':<12} {'p50':>7} {'p99':>7} {'max':>7}")
    for label, name, samples in rows:
        print(f"{label:<16} {name:<12} {_ms(samples)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
