"""The engine: its state (state.py) with the operations over it, and the lifecycle that runs it.

`Engine` is the management API (management.py), the workers' answers (completions.py) and rerun
(rerun.py), each a class over the one `EngineState` that owns its operations, put together here with
what only the whole engine does: start and stop, worker streams, the clock's ticks. The
dependencies go one way, state <- work <- operations <- core; nothing below imports this module.
The protocol's rules themselves are taskhub_core's; these modules apply them to the engine's
records. The engine's judgement calls are one `EnginePolicy` (policy.py), which the harness's
deliberately broken engines replace.
"""

from __future__ import annotations

from typing import Callable, Iterable

from taskhub_wire import pb

from fake_sidecar.engine.changes import ChangeSignal
from fake_sidecar.engine.clock import Clock
from fake_sidecar.engine.completions import Completions
from fake_sidecar.engine.config import Counters, EngineConfig, TaskExecutionIdMode
from fake_sidecar.engine.management import Management
from fake_sidecar.engine.model import CompletionOutcome
from fake_sidecar.engine.policy import REFERENCE_POLICY, EnginePolicy
from fake_sidecar.engine.rerun import Rerun
from fake_sidecar.engine.store import MemoryStore, SqliteStore
from fake_sidecar.engine.vectors import VectorChannel

__all__ = ["CompletionOutcome", "Counters", "Engine", "EngineConfig", "TaskExecutionIdMode"]


class Engine(Management, Completions, Rerun):
    def __init__(self, *, store: MemoryStore | SqliteStore, clock: Clock, config: EngineConfig = EngineConfig(),
                 policy: EnginePolicy = REFERENCE_POLICY) -> None:
        super().__init__(store=store, clock=clock, config=config, policy=policy)
        self.dispatcher.on_terminal = self.drop_for_terminal
        with self.lock:  # queueing notifies the stream condition, which needs the lock
            for inst in self.table.load():
                self.dispatcher.requeue(inst)
                self.keep_until_retention(inst)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the background thread that fires timers, expires leases and moves a virtual clock."""
        self.ticker.start(run_due=self.run_due, idle=self.dispatcher.idle, closed=lambda: self.closed)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.dispatcher.wake_all()
            self.ticker.wake_all()
            self.table.wake_every_watcher()
        self.ticker.join(timeout=5)
        self.store.close()

    # ----------------------------------------------------------------- worker streams

    def open_stream(self, *, stateful: bool = False, app: str = "") -> int:
        """A worker's stream; `app` is the key of the app whose address it connected to (R11.1)."""
        with self.lock:
            self.check_open()
            return self.dispatcher.open_stream(stateful=stateful, app=app)

    def close_stream(self, sid: int) -> None:
        """Redeliver everything that was out on the stream (R4.6 a, R5.3)."""
        with self.lock:
            self.dispatcher.close_stream(sid)

    def connected_streams(self) -> int:
        with self.lock:
            return self.dispatcher.connected_streams()

    def take(self, sid: int, *, timeout: float) -> pb.WorkItem | None:
        """The next work item for stream `sid`, or None after `timeout` seconds."""
        with self.lock:
            return self.dispatcher.take(sid, timeout=timeout)

    def inject_turn(self, *, instance_id: str, past: Iterable[pb.HistoryEvent], new: Iterable[pb.HistoryEvent],
                    timeout: float = 30.0) -> pb.WorkflowResponse | None:
        """Send a hand-made turn to the next connected worker and return its answer, applying nothing
        (test vectors, vectors.py)."""
        with self.lock:
            if self.vectors is None:
                self.vectors = VectorChannel(lock=self.lock, dispatcher=self.dispatcher)
            channel = self.vectors
        return channel.inject(instance_id=instance_id, past=past, new=new, timeout=timeout,
                              check_open=self.check_open)

    def claim_vector_answer(self, resp: pb.WorkflowResponse) -> bool:
        """If `resp` answers an injected turn, hand it to its injector and return True (what
        `complete_turn` does first). Cheap enough for the gRPC event loop: an engine that never
        injected takes no lock here."""
        if self.vectors is None:
            return False
        with self.lock:
            self.check_open()
            return self.vectors.claim_answer(resp)

    # ----------------------------------------------------------------- time

    def run_due(self, now: int) -> None:
        """Serve every instance due by `now`: queue its turn, expire its activities' leases, purge it
        when its retention has passed."""
        with self.lock:
            for iid in self.ticker.pop_due(now):
                inst = self.table.find(iid)
                if inst is None:
                    continue
                due = self.retention_due(inst)
                if due is not None and due <= now:
                    self.purge_retained(inst)
                    continue
                self.dispatcher.maybe_queue(inst)
                self.dispatcher.expire_leases(inst, now)

    def advance_clock(self, seconds: float) -> None:
        """Move a virtual clock forward (harness control)."""
        with self.lock:
            self.ticker.advance(seconds)

    def pass_time(self, seconds: float, *, stop: Callable[[], bool] = lambda: False, asleep: bool = False) -> int:
        """Let `seconds` of engine time pass (ticker.py `pass_time`); the nanoseconds left when the engine
        closed or `stop()` (looked at least once a second) ended it first. `asleep`: the caller is work in
        flight (an activity's sleep) that does not keep the engine busy meanwhile (dispatcher.py `idle`)."""
        with self.lock:
            self.dispatcher.asleep += asleep
            try:
                return self.ticker.pass_time(seconds, done=lambda: self.closed or stop())
            finally:
                self.dispatcher.asleep -= asleep

    def allow_jump(self, signal: ChangeSignal, seq: int) -> None:
        """A waiter read the state at change `seq` of `signal` and it was not yet what it waits for: an idle
        virtual clock may jump on until the next change (ticker.py `permit`). A signal of an engine
        that has since been replaced grants nothing."""
        with self.lock:
            changes = self.table.changes
            if changes is signal:
                self.ticker.permit(lambda: changes.seq == seq)

    def hold_clock(self, held: bool) -> None:
        """Keep a virtual clock from jumping to the next timer while idle (harness control, ticker.py)."""
        with self.lock:
            self.ticker.hold(held)
