"""pytest-xdist scheduling of scenario items: each worker gets a fixed share of the items, known to it
from the start, so it can run its share ahead of time as a plain pytest run runs the whole session.

xdist's `load` scheduling hands a worker a couple of items at a time, so a worker knows only the item it
runs and the next one; scenarios mostly wait on the engine, so a worker that knows more keeps more in
flight with fewer processes. Both sides compute the shares with one function (`shares`) from the same
collection (xdist checks that every worker collected the same node ids): the controller's scheduler
sends each worker the items of its share, a few at a time (so `-x` and an interrupt stop a worker soon),
and the worker's plugin runs the rest of its share ahead in threads. Items of one `xdist_group` (the
scenarios that need a shared engine alone) are one unit: one worker runs all of them, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

_IN_HAND = 2  # items a worker holds at once: the one it runs and the next (xdist's worker needs a next item)


def group_of(nodeid: str) -> str | None:
    """The `xdist_group` name xdist's loadgroup mode appends to a node id (`id@group`), if any (with
    pytest 9 it appends none: it sets `_nodeid`, which pytest no longer reads; see `ShareScheduling`)."""
    at, close = nodeid.rfind("@"), nodeid.rfind("]")
    return nodeid[at + 1:] if at > close else None


def shares(groups: Sequence[str | None], *, workers: int) -> list[list[int]]:
    """The item indices each of `workers` runs, in collection order, given each item's group (None: none):
    every index in exactly one share, the items of one group in one share, the shares as even in count
    as the groups allow. Each unit (an item, or a whole group at its first item) goes to the share with
    the fewest items so far, the first such on a tie, so plain items are dealt out in turn."""
    units: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        units.setdefault(f"g:{group}" if group else f"i:{index}", []).append(index)
    out: list[list[int]] = [[] for _ in range(max(1, workers))]
    for unit in units.values():
        min(out, key=len).extend(unit)
    return [sorted(share) for share in out]


def worker_index(workerid: str) -> int | None:
    """`gw3` -> 3 (xdist names its first workers gw0..gwN-1; a replacement of a crashed one gets a later name)."""
    return int(workerid[2:]) if workerid.startswith("gw") and workerid[2:].isdigit() else None


class ShareScheduling:
    """An xdist scheduler (the `Scheduling` protocol of `xdist.scheduler.protocol`) that sends worker
    gwK the items of `shares(...)[K]`, `_IN_HAND` at a time, and shuts it down when its share is sent.
    The items of a crashed worker go to the worker xdist starts in its place (or to a live one).
    `group_of` gives an item's group from its node id: the controller has no items, only their ids."""

    def __init__(self, config: Any, log: Any, *, group_of: Callable[[str], str | None]) -> None:
        from xdist.workermanage import parse_tx_spec_config

        self.config = config
        self.log = log.sharesched
        self.numnodes = len(parse_tx_spec_config(config))
        self.node2collection: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.node2unsent: dict[Any, list[int]] = {}
        self.orphans: list[int] = []  # items of a crashed worker not yet given to another
        self.collection: list[str] | None = None
        self.aborted = False  # the workers collected different items: nothing is sent, the run ends
        self.group_of = group_of

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if self.aborted:
            return True
        if not self.collection_is_completed or self.collection is None or self.orphans:
            return False
        return not any(self.node2pending.values()) and not any(self.node2unsent.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.orphans) or any(self.node2pending.values()) or any(self.node2unsent.values())

    def add_node(self, node: Any) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []
        self.node2unsent[node] = []

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.node2collection[node] = list(collection)
        if self.collection is not None and list(collection) != self.collection:
            # A replacement worker that collected something else: it gets nothing and stops.
            self._report_difference(node, collection, against=(None, self.collection))
            self.node2unsent[node] = []
            node.shutdown()

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self._top_up(node)

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self.orphans.insert(0, self.collection.index(item))
        self._adopt()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError()

    def remove_node(self, node: Any) -> str | None:
        """A worker gone: when it crashed, its item in progress is returned (xdist reports it) and the
        rest of its share waits for another worker."""
        pending = self.node2pending.pop(node)
        unsent = self.node2unsent.pop(node, [])
        if not pending:
            self.orphans.extend(unsent)
            self._adopt()
            return None
        assert self.collection is not None
        crashed = pending.pop(0)
        self.orphans.extend([*pending, *unsent])
        self._adopt()
        return self.collection[crashed]

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a worker started in place of a crashed one
            self._adopt()
            return
        collections = list(self.node2collection.items())
        first_node, first = collections[0]
        if any(c != first for _, c in collections[1:]):
            for node, c in collections[1:]:
                if c != first:
                    self._report_difference(node, c, against=(first_node, first))
            self.log("**Different tests collected, aborting run**")
            self.aborted = True  # as with xdist's own schedulers: tests_finished, so xdist stops every worker
            return
        self.collection = list(first)
        parts = shares([self.group_of(i) for i in self.collection], workers=self.numnodes)
        for node in self.nodes:
            k = worker_index(node.gateway.id)
            if k is not None and k < len(parts):
                self.node2unsent[node] = list(parts[k])
                parts[k] = []
        self.orphans.extend(i for part in parts for i in part)  # shares of workers that never came up
        self.orphans.sort()
        for node in self.nodes:
            self._top_up(node)
        self._adopt()

    def _adopt(self) -> None:
        """Give the orphaned items to a live worker that is not shutting down, the first by name."""
        if not self.orphans or self.collection is None:
            return
        live = [n for n in self.nodes if not n.shutting_down and self.node2collection.get(n) == self.collection]
        if not live:
            return
        node = min(live, key=lambda n: (worker_index(n.gateway.id) is None, n.gateway.id))
        self.node2unsent[node] = sorted([*self.node2unsent[node], *self.orphans])
        self.orphans.clear()
        self._top_up(node)

    def _top_up(self, node: Any) -> None:
        if node.shutting_down or self.collection is None:
            return
        pending, unsent = self.node2pending[node], self.node2unsent[node]
        if len(pending) < _IN_HAND and unsent:
            send, unsent[:] = unsent[:_IN_HAND - len(pending)], unsent[_IN_HAND - len(pending):]
            pending.extend(send)
            node.send_runtest_some(send)
        if not unsent:
            node.shutdown()

    def _report_difference(self, node: Any, collection: Sequence[str], *, against: tuple[Any, Sequence[str]]) -> None:
        import pytest
        from xdist.report import report_collection_diff

        other, theirs = against
        name = other.gateway.id if other is not None else "the run"
        message = report_collection_diff(theirs, list(collection), name, node.gateway.id)
        self.log(message)
        self.config.hook.pytest_collectreport(
            report=pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=message, result=[]))
