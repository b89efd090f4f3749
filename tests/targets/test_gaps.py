"""Which declared gap excuses a scenario on a pair: scenario globs, and an engine's gap narrowed to workers lacking a capability."""

from __future__ import annotations

from conformance.targets.base import Gap, Pair, SidecarTarget, WorkerTarget
from conformance.targets.registry import load_targets


def _pair(worker_caps: frozenset[str], gap: Gap) -> Pair:
    return Pair(sidecar=SidecarTarget(name="engine", kind="address", capabilities=frozenset(), gaps=(gap,)),
                worker=WorkerTarget(name="sdk", kind="command", capabilities=worker_caps))


def test_when_lacking_excuses_only_pairs_whose_worker_lacks_the_capability() -> None:
    gap = Gap(requirement="PURGE-TERMINAL-001", reason="r", scenarios=("purge/*",), when_lacking=("task_execution_id",))
    assert _pair(frozenset(), gap).gap_for("purge/terminal-instance-purged", ["PURGE-TERMINAL-001"]) is gap
    assert _pair(frozenset({"task_execution_id"}), gap).gap_for("purge/terminal-instance-purged",
                                                                 ["PURGE-TERMINAL-001"]) is None
    assert _pair(frozenset(), gap).gap_for("listing/paging", ["LIST-END-001"]) is None


def test_daprd_purge_gap_shows_only_without_task_execution_ids() -> None:
    targets = load_targets()
    args = ("purge/terminal-instance-purged", ["PURGE-TERMINAL-001", "MGMT-GET-001", "HIST-QUERY-001"])
    assert targets.pair("daprd", "durabletask-js").gap_for(*args) is not None
    assert targets.pair("daprd", "reference").gap_for(*args) is None
