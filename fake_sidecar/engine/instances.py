"""The instance table: every workflow instance in memory, written through the store.

Every change is written in one transaction (`Tx`) with `commit`; a refused write puts memory back
to what the database holds. Watchers (`Engine.wait`) are woken on every change of an instance.
"""

from __future__ import annotations

import base64
import logging
import threading
from typing import Callable, TypeVar

from google.protobuf.message import DecodeError, Message

from taskhub_core.history import absorb, first_version_name
from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.changes import ChangeSignal
from fake_sidecar.engine.model import (
    NEVER_NS, InboxEntry, Instance, InstanceView, ParentRef, PendingActivity, ts, ts_ns, wire,
)
from fake_sidecar.engine.store import LoadedInstance, MemoryStore, SqliteStore, StoreError, Tx, damaged
from fake_sidecar.engine.ticker import Ticker

log = logging.getLogger("fake_sidecar.engine")
_M = TypeVar("_M", bound=Message)


class InstanceTable:
    """Instances by id, the sequence counter, the watchers; called under the engine lock."""

    def __init__(self, *, store: MemoryStore | SqliteStore, ticker: Ticker) -> None:
        self.store = store
        self._ticker = ticker
        self._by_id: dict[str, Instance] = {}
        self._seq = 0
        self._watchers: dict[str, set[threading.Event]] = {}
        self.changes = ChangeSignal()  # moves on every commit, refused or not, and every notify
        # Called for each instance reloaded after a refused write, to queue what it has pending.
        self.on_reloaded: Callable[[Instance], None] = lambda inst: None

    # ------------------------------------------------------------- reading

    def find(self, iid: str) -> Instance | None:
        return self._by_id.get(iid)

    def get(self, iid: str) -> Instance:
        inst = self._by_id.get(iid)
        if inst is None:
            raise errors.NotFound(f"no such instance exists: workflow instance '{iid}' not found")
        return inst

    def __contains__(self, iid: str) -> bool:
        return iid in self._by_id

    def ids(self) -> list[str]:
        return list(self._by_id)

    def all(self) -> list[Instance]:
        return list(self._by_id.values())

    def children_of(self, inst: Instance) -> list[Instance]:
        """The child instances `inst` started and still owns (a reused id may belong to another now)."""
        out = []
        for child_id in inst.children:
            child = self._by_id.get(child_id)
            if child is not None and child.parent is not None and child.parent.iid == inst.iid:
                out.append(child)
        return out

    def view(self, inst: Instance) -> InstanceView:
        start = inst.start_event()
        completed = inst.completed.executionCompleted if inst.completed is not None else None
        inp = start.executionStarted.input.value if start is not None and start.executionStarted.HasField("input") else None
        return InstanceView(
            iid=inst.iid, name=inst.name, status=inst.status, created_ns=inst.created_ns,
            last_updated_ns=inst.last_updated_ns,
            started_ns=ts_ns(inst.history[0].timestamp) if inst.history else None,
            version=first_version_name(inst.history) or None, input=inp,
            output=completed.result.value if completed is not None and completed.HasField("result") else None,
            custom_status=inst.custom_status,
            failure=completed.failureDetails if completed is not None and completed.HasField("failureDetails") else None,
            parent_iid=inst.parent.iid if inst.parent is not None else None,
            execution_id=inst.execution_id, stalled=inst.stalled,
            # daprd reads it from the start event's ParentInstanceInfo.appID (orchestrator/state.go:313-319).
            parent_app=(start.executionStarted.parentInstance.appID if start is not None and inst.parent is not None
                        and start.executionStarted.parentInstance.HasField("appID") else None),
        )

    # ------------------------------------------------------------- changing

    def next_seq(self, tx: Tx) -> int:
        self._seq += 1
        tx.counters["seq"] = self._seq
        return self._seq

    def put(self, inst: Instance) -> None:
        self._by_id[inst.iid] = inst

    def forget(self, inst: Instance, tx: Tx) -> None:
        tx.drop.add(inst.iid)
        self._by_id.pop(inst.iid, None)
        inst.turn = None
        inst.activities.clear()
        inst.inbox.clear()

    def add_inbox(self, inst: Instance, ev: pb.HistoryEvent, tx: Tx, *, visible_at: int = 0) -> None:
        entry = InboxEntry(seq=self.next_seq(tx), visible_at=visible_at, gen=inst.generation, event=ev)
        inst.inbox.append(entry)
        tx.inbox_add.append((inst.iid, entry.seq, entry.visible_at, entry.gen, wire(ev)))
        if visible_at and visible_at < NEVER_NS:
            self._ticker.wake_at(visible_at, inst.iid)

    def append_history(self, inst: Instance, ev: pb.HistoryEvent, tx: Tx) -> None:
        """Record a committed event and what it implies (`absorb`)."""
        inst.history.append(ev)
        absorb(inst, ev)
        tx.history_append.append((inst.iid, len(inst.history) - 1, wire(ev)))

    def stall(self, inst: Instance, stall: tuple[int, str]) -> None:
        """§7: record one ExecutionStalled (not again for the same cause) and park the instance."""
        tx = Tx()
        last = inst.history[-1] if inst.history else None
        same = (last is not None and last.HasField("executionStalled")
                and last.executionStalled.description == stall[1])
        if not same:
            ev = pb.HistoryEvent(eventId=-1, timestamp=ts(self._ticker.now()))
            ev.executionStalled.reason = stall[0]
            ev.executionStalled.description = stall[1]
            inst.history.append(ev)
            tx.history_append.append((inst.iid, len(inst.history) - 1, wire(ev)))
            inst.last_updated_ns = ts_ns(ev.timestamp)
        inst.stalled = stall
        inst.parked = True
        log.warning("workflow %s is STALLED: %s", inst.iid, stall[1])
        self.commit(tx, inst)
        self.notify(inst.iid)

    def commit(self, tx: Tx, *touched: Instance) -> None:
        """Write `tx`; if the store refuses it, memory goes back to what the database holds."""
        for inst in touched:
            tx.instances[inst.iid] = inst.meta()
        try:
            self.store.apply(tx)
        except errors.StoreFailed as exc:
            log.warning("%s", exc.message)
            self._roll_back(tx)
            raise
        finally:
            self.changes.bump()

    def _roll_back(self, tx: Tx) -> None:
        """Reload every instance `tx` touched from the store, keeping what is out on streams."""
        iids = tx.touched()
        loaded, _ = self.store.load(iids)
        by_iid = {li.iid: li for li in loaded}
        for iid in iids:
            old = self._by_id.pop(iid, None)
            li = by_iid.get(iid)
            if li is not None:
                inst = self._restore(li)
                if old is not None:
                    _keep_volatile(old, inst)
                self._by_id[iid] = inst
                self.on_reloaded(inst)
            self.notify(iid)

    # ------------------------------------------------------------- watchers

    def watch(self, iid: str, flag: threading.Event) -> None:
        self._watchers.setdefault(iid, set()).add(flag)

    def unwatch(self, iid: str, flag: threading.Event) -> None:
        ws = self._watchers.get(iid)
        if ws is not None:
            ws.discard(flag)
            if not ws:
                del self._watchers[iid]

    def notify(self, iid: str) -> None:
        for w in self._watchers.get(iid, ()):
            w.set()
        self.changes.bump()

    def wake_every_watcher(self) -> None:
        self.changes.bump()
        for watchers in self._watchers.values():
            for w in watchers:
                w.set()

    # ------------------------------------------------------------- loading

    def load(self) -> list[Instance]:
        """Read every stored instance (histories stay cold until first use); returns them."""
        loaded, counters = self.store.load()
        self._seq = counters.get("seq", 0)
        for li in loaded:
            inst = self._restore(li)
            self._by_id[inst.iid] = inst
        return list(self._by_id.values())

    def _restore(self, li: LoadedInstance) -> Instance:
        """An instance from its stored rows; its history is read on first use (see `_warm`)."""
        m = li.meta
        try:
            parent = ParentRef.from_meta(m["parent"])
        except ValueError as exc:
            raise StoreError(damaged(getattr(self.store, "path", ":memory:"), li.iid, str(exc))) from None
        fields = dict(iid=li.iid, seq=m["seq"], name=m["name"], generation=m["generation"],
                      execution_id=m["execution_id"], created_ns=m["created_ns"],
                      last_updated_ns=m["last_updated_ns"], custom_status=m["custom_status"],
                      stalled=tuple(m["stalled"]) if m["stalled"] else None, parent=parent,
                      continuing=m.get("continuing", False), app=str(m.get("app", "")),
                      incoming=base64.b64decode(m["incoming"]) if m.get("incoming") else None)
        inst = Instance.restored(warm=self._warm, **fields) if self.store.durable else Instance(**fields)
        for seq, vis, gen, raw in li.inbox:
            inst.inbox.append(InboxEntry(seq=seq, visible_at=vis, gen=gen,
                                         event=self._parse(pb.HistoryEvent, raw, li.iid, f"inbox event seq {seq}")))
        for task_id, gen, raw in li.activities:
            inst.activities[task_id] = PendingActivity(
                task_id=task_id, gen=gen, request=self._parse(pb.ActivityRequest, raw, li.iid, f"activity {task_id}"),
                app=None)  # its app and router are its TaskScheduled's (crossapp.activity_route)
        return inst

    def _warm(self, inst: Instance) -> None:
        raws = self.store.load_history(inst.iid)
        inst.warm_up(events=[self._parse(pb.HistoryEvent, raw, inst.iid, f"history event #{i}")
                             for i, raw in enumerate(raws)], absorb=absorb)

    def _parse(self, kind: type[_M], raw: bytes, iid: str, what: str) -> _M:
        try:
            return kind.FromString(raw)
        except (DecodeError, TypeError) as exc:
            raise StoreError(damaged(getattr(self.store, "path", ":memory:"), iid,
                                     f"its {what} is not a valid {kind.DESCRIPTOR.name} ({exc})")) from None


def _keep_volatile(old: Instance, new: Instance) -> None:
    """After a rollback: what is out on worker streams stays out (its answer is still expected)."""
    new.turn, new.queued, new.retries, new.retry_at = old.turn, old.queued, old.retries, old.retry_at
    new.parked = new.parked or old.parked
    for task_id, act in new.activities.items():
        was = old.activities.get(task_id)
        if was is not None and was.gen == act.gen:
            act.token, act.stream, act.dispatched_at, act.queued, act.dispatches = (
                was.token, was.stream, was.dispatched_at, was.queued, was.dispatches)
