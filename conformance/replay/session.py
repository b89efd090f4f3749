"""The edge of `conformance replay`: a reference sidecar that only replays, the user's worker, and
the turns of every history sent to it.

The sidecar is the reference engine with an in-memory store and no instances: every turn reaches
the worker through `Engine.inject_turn`, which hands it to a connected worker and returns the
answer without applying it. So nothing is persisted, no activity is ever dispatched (their results
come from history), and the worker sees exactly the work items daprd would send.
"""

from __future__ import annotations

import enum
import os
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conformance.dialects.compare import EXACT, Profile
from conformance.replay import turns as turns_mod
from conformance.replay.history import CapturedHistory
from conformance.replay.judge import Divergence, Verdict, judge_turn
from conformance.targets.reference import Engine, FailedPrecondition, SidecarServer

if TYPE_CHECKING:
    from conformance.targets.process import ManagedProcess

DEFAULT_TURN_TIMEOUT_S = 30.0


class ReplayError(Exception):
    """The replay could not run (no worker connected, the worker command failed to start)."""


@dataclass(frozen=True, kw_only=True)
class InstanceResult:
    history: CapturedHistory
    verdict: Verdict
    turns_total: int
    turns_replayed: int
    seconds: float
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def headline(self) -> str:
        if self.divergence is None:
            if self.turns_replayed == 0:
                return f"replays cleanly (whole-history check, {self.turns_total} turn(s))"
            return f"replays cleanly ({self.turns_replayed} turn(s))"
        d = self.divergence
        if d.verdict is Verdict.NONDETERMINISM:
            return f"nondeterminism at event #{d.event_index} (turn {d.turn}): {d.summary}"
        if d.verdict is Verdict.STALL:
            return f"would stall ({d.stall_reason}) in turn {d.turn}: {d.stall_description}"
        if d.verdict is Verdict.NOT_REGISTERED:
            return d.summary
        return f"error in turn {d.turn}: {d.summary}"


class Mode(enum.Enum):
    TURNS = "turns"  # every recorded turn, in order (the definition of a clean replay)
    FAST = "fast"  # two whole-history requests first; every turn only when they find something


def _quick_clean(h: CapturedHistory, answer: Callable[[str, list, list], object], profile: Profile) -> bool:
    """True when the whole run's actions are the recorded ones and the SDK's own replay of the
    history accepts it (see turns.whole). Misses what only a turn-by-turn replay sees: an action
    made in an earlier turn than recorded (SDKs accept that), or made later on an SDK that does
    not check its replay."""
    events = list(h.events)
    for keep in (False, True):
        turn, past, new = turns_mod.whole(events, keep_actions=keep)
        resp = answer(h.instance_id, past, new)
        if judge_turn(events=events, turn=turn, instance_id=h.instance_id, name=h.name, past=past, new=new,
                      resp=resp, profile=profile) is not None:  # type: ignore[arg-type]
            return False
    return True


def replay_instance(h: CapturedHistory, answer: Callable[[str, list, list], object], *,
                    profile: Profile = EXACT, mode: Mode = Mode.FAST) -> InstanceResult:
    """Replay each recorded turn of `h` in order through `answer(instance_id, past, new)` and stop
    at the first divergence (with Mode.FAST, only when the quick whole-history check fails)."""
    began = time.monotonic()
    events = list(h.events)
    cut = turns_mod.split(events)
    if mode is Mode.FAST and _quick_clean(h, answer, profile):
        return InstanceResult(history=h, verdict=Verdict.CLEAN, turns_total=len(cut), turns_replayed=0,
                              seconds=time.monotonic() - began)
    for n, turn in enumerate(cut, start=1):
        past, new = turns_mod.request(events, turn)
        resp = answer(h.instance_id, past, new)
        div = judge_turn(events=events, turn=turn, instance_id=h.instance_id, name=h.name, past=past, new=new,
                         resp=resp, profile=profile)  # type: ignore[arg-type]
        if div is not None:
            return InstanceResult(history=h, verdict=div.verdict, turns_total=len(cut), turns_replayed=n,
                                  seconds=time.monotonic() - began, divergence=div)
    return InstanceResult(history=h, verdict=Verdict.CLEAN, turns_total=len(cut), turns_replayed=len(cut),
                          seconds=time.monotonic() - began)


_REFUSED = ("the replay sidecar of `conformance replay` only serves recorded turns to your worker: it starts, "
            "changes and runs no workflow instance (does your app start workflows when it boots? skip that during "
            "a replay)")


class ReplayEngine(Engine):
    """The reference engine with every client operation refused, so that nothing a worker's app
    does on its own (start a workflow at boot, raise an event) runs activities or makes state."""

    def start_instance(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)

    def raise_event(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)

    def terminate(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)

    def suspend(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)

    def resume(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)

    def purge(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)

    def rerun(self, **kw):  # type: ignore[no-untyped-def, override]
        raise FailedPrecondition(_REFUSED)


@dataclass
class ReplaySidecar:
    """The reference sidecar in replay mode, listening for the user's worker."""

    server: SidecarServer
    turn_timeout: float = DEFAULT_TURN_TIMEOUT_S
    worker_alive: Callable[[], bool] = lambda: True  # a dead worker's turns fail at once, not after the timeout

    @classmethod
    def start(cls, *, listen: str = "127.0.0.1:0", api_token: str | None = None,
              turn_timeout: float = DEFAULT_TURN_TIMEOUT_S) -> "ReplaySidecar":
        host, sep, port = listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ReplayError(f"--listen must be HOST:PORT (port 0 picks a free one), got {listen!r}")
        try:
            server = SidecarServer.start(host=host, port=int(port), db=":memory:", api_token=api_token,
                                         engine_class=ReplayEngine)
        except OSError as exc:
            raise ReplayError(f"cannot listen on {listen}: {exc}") from None
        return cls(server=server, turn_timeout=turn_timeout)

    @property
    def address(self) -> str:
        return self.server.address

    def wait_for_worker(self, *, timeout: float, alive: Callable[[], bool] = lambda: True) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server.engine.connected_streams() > 0:
                return True
            if not alive():
                return False
            time.sleep(0.05)
        return self.server.engine.connected_streams() > 0

    def answer(self, instance_id: str, past: list, new: list):
        if not self.worker_alive():
            return None
        return self.server.engine.inject_turn(instance_id=instance_id, past=past, new=new,
                                              timeout=self.turn_timeout)

    def stop(self) -> None:
        self.server.stop(grace=1.0)


@dataclass
class WorkerProcess:
    """A worker started by --worker-command ({address} substituted), ended by its pid."""

    command: str
    log_dir: Path
    proc: "ManagedProcess | None" = field(default=None)

    def start(self, address: str, *, api_token: str | None = None) -> None:
        from conformance.targets.process import ManagedProcess, ProcessSpec

        argv = tuple(shlex.split(self.command.replace("{address}", address)))
        if not argv:
            raise ReplayError("--worker-command is empty")
        # What a Dapr app reads to find its sidecar, so that an app started as in production (no
        # {address} in its command) connects here and not to a daprd.
        host, _, port = address.rpartition(":")
        env = dict(os.environ, DAPR_GRPC_ENDPOINT=address, DAPR_RUNTIME_HOST=host, DAPR_GRPC_PORT=port)
        if api_token:
            env["DAPR_API_TOKEN"] = api_token
        try:
            self.proc = ManagedProcess.start(spec=ProcessSpec(name="replay-worker", argv=argv, log_dir=self.log_dir,
                                                              env=env))
        except OSError as exc:
            raise ReplayError(f"cannot start --worker-command {argv[0]!r}: {exc}") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_running()

    def describe_exit(self) -> str:
        if self.proc is None:
            return "the worker command was not started"
        return (f"the worker command exited with {self.proc.returncode}; its stderr ends with:\n"
                f"{self.proc.stderr_tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=10.0)


def replay_all(histories: Sequence[CapturedHistory], sidecar: ReplaySidecar, *, jobs: int = 8,
               profile: Profile = EXACT, mode: Mode = Mode.FAST,
               on_result: Callable[[InstanceResult], None] | None = None) -> list[InstanceResult]:
    """Every history through the connected worker, `jobs` instances at a time; results in input order."""
    lock = threading.Lock()

    def one(h: CapturedHistory) -> InstanceResult:
        r = replay_instance(h, sidecar.answer, profile=profile, mode=mode)
        if on_result is not None:
            with lock:
                on_result(r)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="replay") as pool:
        return list(pool.map(one, histories))
