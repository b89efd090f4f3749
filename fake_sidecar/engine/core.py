"""The engine: a shell of one lock, the instance table (over the store), the dispatcher and the clock.

One lock guards all state; every state change is written through the store in one transaction
(`Tx`) before anyone can observe it. The operations live in modules named for what they do:
management.py (the management API), rerun.py, completions.py (workers' answers and what a
committed turn sets off), dispatcher.py (queues, streams, tokens, leases), ticker.py (time),
instances.py (the table and its commits). The protocol's rules themselves are taskhub_core's;
these modules apply them to the engine's records. The engine's judgement calls are one `EnginePolicy`
(policy.py), which the harness's deliberately broken engines replace.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

from taskhub_core.history import status_name
from taskhub_wire import pb

from fake_sidecar.engine import completions, errors, management, rerun
from fake_sidecar.engine.clock import Clock
from fake_sidecar.engine.config import Counters, EngineConfig, TaskExecutionIdMode
from fake_sidecar.engine.incidents import IncidentLog
from fake_sidecar.engine.dispatcher import Dispatcher
from fake_sidecar.engine.instances import InstanceTable
from fake_sidecar.engine.model import CompletionOutcome, Instance, InstanceView
from fake_sidecar.engine.policy import REFERENCE_POLICY, EnginePolicy
from fake_sidecar.engine.store import MemoryStore, SqliteStore
from fake_sidecar.engine.ticker import Ticker
from fake_sidecar.engine.vectors import VectorChannel

__all__ = ["CompletionOutcome", "Counters", "Engine", "EngineConfig", "TaskExecutionIdMode"]


class Engine:
    def __init__(self, *, store: MemoryStore | SqliteStore, clock: Clock, config: EngineConfig = EngineConfig(),
                 policy: EnginePolicy = REFERENCE_POLICY) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.policy = policy
        self.counters = Counters()
        self.incidents = IncidentLog()  # what it refused, redelivered or dropped, per instance
        self.lock = threading.RLock()
        self.closed = False
        self.ticker = Ticker(clock=clock, lock=self.lock)
        self.table = InstanceTable(store=store, ticker=self.ticker)
        self.dispatcher = Dispatcher(lock=self.lock, table=self.table, ticker=self.ticker, policy=policy,
                                     config=config, counters=self.counters, closed=lambda: self.closed,
                                     incidents=self.incidents)
        self.table.on_reloaded = self.dispatcher.requeue
        self.dispatcher.on_terminal = lambda inst, visible: completions.drop_for_terminal(self, inst, visible)
        self.vectors: VectorChannel | None = None  # made by the first inject_turn (test vectors only)
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

    def check_open(self) -> None:
        if self.closed:
            raise errors.ShuttingDown("shutting down")

    def now(self) -> int:
        """Strictly increasing timestamps (see Ticker.now)."""
        return self.ticker.now()

    # ----------------------------------------------------------------- management API

    def start_instance(self, *, instance_id: str, name: str, input: str | None,
                       scheduled_start_ns: int | None = None, enforce_unique: bool = False,
                       tags: dict[str, str] | None = None, app: str = "",
                       trace: pb.TraceContext | None = None) -> str:
        return management.start_instance(self, instance_id=instance_id, name=name, input=input,
                                         scheduled_start_ns=scheduled_start_ns, enforce_unique=enforce_unique,
                                         tags=tags, app=app, trace=trace)

    def get_instance(self, iid: str) -> InstanceView | None:
        return management.get_instance(self, iid)

    def wait(self, iid: str, pred: Callable[[InstanceView], bool], *, timeout: float | None,
             is_active: Callable[[], bool] = lambda: True,
             gone_is_done: bool = False) -> InstanceView | management.Gone | None:
        return management.wait(self, iid, pred, timeout=timeout, is_active=is_active, gone_is_done=gone_is_done)

    def raise_event(self, *, iid: str, name: str, input: str | None) -> None:
        management.raise_event(self, iid=iid, name=name, input=input)

    def terminate(self, *, iid: str, output: str | None, recursive: bool) -> None:
        management.terminate(self, iid=iid, output=output, recursive=recursive)

    def suspend(self, *, iid: str, reason: str | None) -> None:
        management.suspend(self, iid=iid, reason=reason)

    def resume(self, *, iid: str, reason: str | None) -> bool:
        return management.resume(self, iid=iid, reason=reason)

    def purge(self, *, iid: str, recursive: bool, force: bool) -> int:
        return management.purge(self, iid=iid, recursive=recursive, force=force)

    def purge_by_filter(self, *, created_from_ns: int | None, created_to_ns: int | None,
                        statuses: frozenset[int]) -> int:
        return management.purge_by_filter(self, created_from_ns=created_from_ns, created_to_ns=created_to_ns,
                                          statuses=statuses)

    def history(self, iid: str) -> list[pb.HistoryEvent]:
        return management.history(self, iid)

    def list_instance_ids(self, *, page_size: int, token: str | None) -> tuple[list[str], str | None]:
        return management.list_instance_ids(self, page_size=page_size, token=token)

    def rerun(self, *, source: str, event_id: int, new_iid: str | None, input: str | None,
              overwrite_input: bool, new_child_iid: str | None) -> str:
        return rerun.rerun(self, source=source, event_id=event_id, new_iid=new_iid, input=input,
                           overwrite_input=overwrite_input, new_child_iid=new_child_iid)

    def instance_ids(self) -> Iterable[str]:
        with self.lock:
            return self.table.ids()

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

    def complete_activity(self, resp: pb.ActivityResponse) -> CompletionOutcome:
        """Apply an activity result: APPLIED, STALE or UNKNOWN (all answered OK)."""
        return completions.complete_activity(self, resp)

    def complete_turn(self, resp: pb.WorkflowResponse) -> CompletionOutcome:
        """Apply a workflow turn: APPLIED, STALLED, ABANDONED, STALE, UNKNOWN, or VECTOR (an injected turn's)."""
        return completions.complete_turn(self, resp)

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

    # ----------------------------------------------------------------- time

    def run_due(self, now: int) -> None:
        """Serve every instance due by `now`: queue its turn, expire its activities' leases, purge it
        when its retention has passed."""
        with self.lock:
            for iid in self.ticker.pop_due(now):
                inst = self.table.find(iid)
                if inst is None:
                    continue
                due = self._retention_due(inst)
                if due is not None and due <= now:
                    management.purge_retained(self, inst)
                    continue
                self.dispatcher.maybe_queue(inst)
                self.dispatcher.expire_leases(inst, now)

    def _retention_due(self, inst: Instance) -> int | None:
        """When a finished instance's retention (daprd stateRetentionPolicy) runs out; None: kept."""
        if not inst.terminal or not self.config.retention_s:
            return None
        kept = self.config.retention_after(status_name(inst.status))
        return None if kept is None else inst.last_updated_ns + int(kept * 1e9)

    def keep_until_retention(self, inst: Instance) -> None:
        """Wake for `inst` when its retention runs out (called when it finishes and on reload)."""
        due = self._retention_due(inst)
        if due is not None:
            self.ticker.wake_at(due, inst.iid)

    def advance_clock(self, seconds: float) -> None:
        """Move a virtual clock forward (harness control)."""
        with self.lock:
            self.ticker.advance(seconds)
