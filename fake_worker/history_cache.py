"""Stateful history on the worker side (WORKER_CAPABILITY_STATEFUL_HISTORY, engine-rules R5.7).

A worker that announces the capability may get a turn's pastEvents as a delta: the engine leaves out
the first `cachedHistory.eventCount` events, which the worker kept from an earlier turn on the same
stream. The cache lives as long as one stream. A prefix is taken only from the same execution (the
request's executionId): a later generation's history can reach the old count on another stream. On
a miss (nothing cached, too few events, another execution, or evicted by the size limit) the worker
reads the committed history with GetInstanceHistory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from taskhub_wire import pb

History = tuple[pb.HistoryEvent, ...]


@dataclass(frozen=True, slots=True)
class Resolved:
    """A turn's full pastEvents and how they were obtained."""

    past: History
    source: str  # "full" | "delta" | "miss"


@dataclass
class HistoryCache:
    """Full past histories by instance id, for one stream; at most `max_instances` (None: no limit)."""

    max_instances: int | None = None
    _entries: "OrderedDict[str, tuple[str, History]]" = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    misses: int = 0

    def resolve(self, req: pb.WorkflowRequest, *, fetch: Callable[[str], Sequence[pb.HistoryEvent]]) -> Resolved:
        """The full past of `req`; `fetch(instance_id)` reads the committed history on a miss."""
        iid, execution = req.instanceId, req.executionId.value
        if not req.HasField("cachedHistory"):
            resolved = Resolved(past=tuple(req.pastEvents), source="full")
        else:
            count = req.cachedHistory.eventCount
            with self._lock:
                kept = self._entries.get(iid)
            if kept is not None and kept[0] == execution and len(kept[1]) >= count:
                resolved = Resolved(past=kept[1][:count] + tuple(req.pastEvents), source="delta")
            else:
                with self._lock:
                    self.misses += 1
                resolved = Resolved(past=tuple(fetch(iid)), source="miss")
        self._keep(iid, execution, resolved.past)
        return resolved

    def _keep(self, iid: str, execution: str, past: History) -> None:
        with self._lock:
            self._entries.pop(iid, None)
            if self.max_instances == 0:
                return
            self._entries[iid] = (execution, past)
            while self.max_instances is not None and len(self._entries) > self.max_instances:
                self._entries.popitem(last=False)  # the least recently used
