"""Which declared gap excuses a scenario on a pair: scenario globs, and an engine's gap narrowed to workers lacking a capability."""

from __future__ import annotations

from pathlib import Path

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


def test_every_declared_or_required_capability_is_a_known_one() -> None:
    """A capability a target file declares or a scenario requires is listed (with what it means) in
    conformance/targets/template.py, so `--capability NAME` accepts it and `init-target` can name it."""
    import glob

    import yaml

    from conformance.targets.template import SIDECAR_CAPABILITIES, WORKER_CAPABILITIES

    root = Path(__file__).resolve().parents[2]
    known = set(WORKER_CAPABILITIES) | set(SIDECAR_CAPABILITIES)
    named: dict[str, str] = {}
    for path in [*glob.glob(str(root / "drivers/*/target.yaml")), str(root / "conformance/targets/targets.yaml")]:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        for kind in ("workers", "sidecars"):
            for target in (doc.get(kind) or {}).values():
                for name in target.get("capabilities") or ():
                    named.setdefault(name, path)
    for path in glob.glob(str(root / "scenarios/**/*.yaml"), recursive=True):
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        for name in doc.get("requires") or ():
            named.setdefault(name, path)
    unknown = {name: where for name, where in named.items() if name not in known}
    assert not unknown, f"capabilities not described in conformance/targets/template.py: {unknown}"


def test_when_having_excuses_only_pairs_that_have_the_capability() -> None:
    gap = Gap(requirement="ROUTE-POLICY-001", reason="r", scenarios=("crossapp/*",), when_having=("history_signing",))
    args = ("crossapp/access-policy-refuses-unlisted-child", ["ROUTE-POLICY-001"])
    assert _pair(frozenset(), gap).gap_for(*args) is None
    assert _pair(frozenset({"history_signing"}), gap).gap_for(*args) is gap


def test_daprd_signing_gaps_stay_off_the_other_daprd_targets() -> None:
    targets = load_targets()
    args = ("crossapp/access-policy-refuses-unlisted-child", ["ROUTE-POLICY-001"])
    assert targets.pair("daprd-signing", "reference").gap_for(*args) is not None
    assert targets.pair("daprd-mtls", "reference").gap_for(*args) is None
    assert targets.pair("daprd", "reference").gap_for(*args) is None
