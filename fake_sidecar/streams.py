"""Bridges between the asyncio gRPC edge and the engine's threaded core.

An idle GetWorkItems stream is a coroutine awaiting a future, not a blocked thread: one pump
thread hands work items to waiting streams in arrival order. Any waiting stream may take any
item (the engine's queue is shared), so serving them one after another loses nothing, and a
stream only waits again once it has written its previous item (gRPC flow control still holds).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from typing import Any

from fake_sidecar.engine import Engine
from fake_sidecar.engine.errors import ShuttingDown
from fake_sidecar.engine.model import wire

_POLL_S = 0.5  # re-check a waiting stream's future this often (a cancelled one is skipped)


class Call:
    """What the engine-facing handlers need from a call, safe to read from any thread."""

    def __init__(self, context: Any) -> None:
        remaining = context.time_remaining()
        self._deadline = None if remaining is None else time.monotonic() + remaining
        self._done = threading.Event()
        context.add_done_callback(lambda *_: self._done.set())

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def is_active(self) -> bool:
        return not self._done.is_set()


class WorkItemPump:
    """One thread that takes work items from the engine for whichever stream waits longest."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self._loop = loop
        self._waiting: queue.SimpleQueue[tuple[int, asyncio.Future[bytes]] | None] = queue.SimpleQueue()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sidecar-work-pump", daemon=True)
        self._thread.start()

    def next_item(self, sid: int) -> "asyncio.Future[bytes]":
        """A future for the next serialized work item of stream `sid` (call on the loop)."""
        fut: asyncio.Future[bytes] = self._loop.create_future()
        if self._closing.is_set():
            fut.set_exception(ShuttingDown("shutting down"))
        else:
            self._waiting.put((sid, fut))
        return fut

    def close(self) -> None:
        """Every waiting and later stream ends with ShuttingDown; the thread exits."""
        self._closing.set()
        self._waiting.put(None)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            entry = self._waiting.get()
            if entry is None:
                break
            sid, fut = entry
            self._serve(sid, fut)
        # Whoever still waits learns that the sidecar stops.
        while True:
            try:
                entry = self._waiting.get_nowait()
            except queue.Empty:
                return
            if entry is not None:
                self._settle(entry[1], exc=ShuttingDown("shutting down"))

    def _serve(self, sid: int, fut: "asyncio.Future[bytes]") -> None:
        while not fut.done():  # done: the stream was cancelled while it waited
            if self._closing.is_set():
                self._settle(fut, exc=ShuttingDown("shutting down"))
                return
            try:
                item = self._engine.take(sid, timeout=_POLL_S)
            except ShuttingDown as exc:
                self._settle(fut, exc=exc)
                return
            if item is not None:
                # If the stream died meanwhile the item is lost here, but the engine still has it
                # out on `sid` and redelivers it when the stream's close_stream runs.
                self._settle(fut, result=wire(item))
                return

    def _settle(self, fut: "asyncio.Future[bytes]", *, result: bytes | None = None,
                exc: BaseException | None = None) -> None:
        def settle() -> None:
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)  # type: ignore[arg-type]

        try:
            self._loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is already closed: nobody waits any more
            pass
