"""The engine's state: one lock over the store, the instance table, the dispatcher and the ticker,
and what the engine counts and logs.

One lock guards all of it; every change is written through the store in one transaction (`Tx`)
before anyone can observe it. The operations that change it are classes over this state, one module
each, importing it and never each other's callers: work.py (what an operation sets off),
management.py, completions.py and rerun.py; core.py puts them together as the `Engine`.
"""

from __future__ import annotations

import threading

from taskhub_core.history import status_name

from fake_sidecar.engine import errors
from fake_sidecar.engine.clock import Clock
from fake_sidecar.engine.config import Counters, EngineConfig
from fake_sidecar.engine.dispatcher import Dispatcher
from fake_sidecar.engine.incidents import IncidentLog
from fake_sidecar.engine.instances import InstanceTable
from fake_sidecar.engine.model import Instance
from fake_sidecar.engine.policy import REFERENCE_POLICY, EnginePolicy
from fake_sidecar.engine.store import MemoryStore, SqliteStore
from fake_sidecar.engine.ticker import Ticker
from fake_sidecar.engine.vectors import VectorChannel


class EngineState:
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
        self.vectors: VectorChannel | None = None  # made by the first inject_turn (test vectors only)

    def check_open(self) -> None:
        if self.closed:
            raise errors.ShuttingDown("shutting down")

    def retention_due(self, inst: Instance) -> int | None:
        """When a finished instance's retention (daprd stateRetentionPolicy) runs out; None: kept."""
        if not inst.terminal or not self.config.retention_s:
            return None
        kept = self.config.retention_after(status_name(inst.status))
        return None if kept is None else inst.last_updated_ns + int(kept * 1e9)

    def keep_until_retention(self, inst: Instance) -> None:
        """Wake for `inst` when its retention runs out (called when it finishes and on reload)."""
        due = self.retention_due(inst)
        if due is not None:
            self.ticker.wake_at(due, inst.iid)
