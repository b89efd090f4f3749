"""The loopback limit: serial unary gRPC round trips per second between two Python processes.

A bytes echo server (a generic handler, no protobuf) runs as its own process on 127.0.0.1 port 0;
this process calls it one call at a time. Every fuzzed turn is at least one such round trip to an
SDK's worker, so this is the ceiling the fuzz rate is measured against, at the load of the moment.

    python bench/loopback.py [--seconds 3]          # prints round trips per second
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

_SERVER = r"""
import sys
from concurrent import futures
import grpc
echo = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {"Echo": echo}),))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()  # runs until its parent closes stdin
server.stop(0)
"""
PAYLOAD = b"x" * 200  # about a small turn's size


class EchoServer:
    """The echo server process; `close()` ends it (by closing its stdin, then by its pid)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline() if self.proc.stdout is not None else ""
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError("the loopback echo server did not start (is grpcio installed?)")
        self.port = int(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def round_trips_per_second(*, seconds: float = 3.0, server: EchoServer | None = None) -> float:
    """Serial unary round trips per second to an echo server (one started for the call, or `server`)."""
    import grpc

    own = server is None
    server = server or EchoServer()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = channel.unary_unary("/bench.Echo/Echo")
            for _ in range(50):  # connection set up, first calls
                call(PAYLOAD)
            n, began = 0, time.perf_counter()
            while time.perf_counter() - began < seconds:
                call(PAYLOAD)
                n += 1
            return n / (time.perf_counter() - began)
    finally:
        if own:
            server.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args(argv)
    print(f"{round_trips_per_second(seconds=args.seconds):.0f} round trips/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
