"""`conformance capture` + `conformance replay` with a real dapr-ext-workflow application
(tests/replay/apps/dx_orders.py, run with the SDK's own virtualenv .sdk/dx)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.targets.durabletask_go import DurableTaskGoNotInstalledError, DurableTaskGoSidecar
from tests.replay import support

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

PYTHON = support.REPO / ".sdk" / "dx" / "bin" / "python"
APP = support.App("dx", (str(PYTHON), str(support.APPS / "dx_orders.py")))


def _dx_v2(histories: Path, ids: dict[str, list[str]]) -> dict[str, int | None]:
    """dx waits for an event behind a timer it records (the 9999 sentinel), so in both instances
    v2's `audit` takes that TimerCreated's id."""
    return {iid: support.after_reserve(histories / f"{iid}.history.json", "timerCreated")
            for iid in ids["completed"] + ids["running"]}


def test_dx_histories_from_the_reference_sidecar(tmp_path: Path) -> None:
    support.require(PYTHON, "install the SDKs with scripts/install-sdks.sh")
    with support.reference_sidecar() as sc:
        ids = support.record(APP, sc.address)
        support.capture(sc.address, ids["completed"] + ids["running"], tmp_path / "h")
    support.check_versions(APP, tmp_path / "h", tmp_path / "r", v2=_dx_v2(tmp_path / "h", ids))
    page = (tmp_path / "r" / "v2" / "instances" / f"{ids['completed'][0]}.html").read_text()
    assert "audit" in page and "class='mark'" in page  # the side-by-side marks the diverging event


def test_dx_fast_and_turns_modes_agree(tmp_path: Path) -> None:
    support.require(PYTHON, "install the SDKs with scripts/install-sdks.sh")
    with support.reference_sidecar() as sc:
        ids = support.record(APP, sc.address)
        support.capture(sc.address, ids["completed"] + ids["running"], tmp_path / "h")
    rc, turns, _ = support.replay(tmp_path / "h", APP.command("v2"), tmp_path / "turns", "--mode", "turns")
    rc_fast, fast, text = support.replay(tmp_path / "h", APP.command("v2"), tmp_path / "fast", "--mode", "fast")
    assert rc == rc_fast == 1, text
    assert {k: (v["verdict"], v["eventIndex"]) for k, v in fast.items()} == \
        {k: (v["verdict"], v["eventIndex"]) for k, v in turns.items()}
    # An app started as it runs next to daprd, finding its sidecar through DAPR_GRPC_ENDPOINT.
    command = APP.command("v2-patched").replace("{address}", "env")
    rc, clean, text = support.replay(tmp_path / "h", command, tmp_path / "env")
    assert rc == 0 and {v["verdict"] for v in clean.values()} == {"CLEAN"}, text
    for mode in ("fast", "turns"):
        rc, clean, text = support.replay(tmp_path / "h", APP.command("v2-patched"), tmp_path / f"{mode}-p", "--mode",
                                         mode)
        assert rc == 0 and {v["verdict"] for v in clean.values()} == {"CLEAN"}, text


def test_dx_histories_from_durabletask_go(tmp_path: Path) -> None:
    support.require(PYTHON, "install the SDKs with scripts/install-sdks.sh")
    try:
        engine = DurableTaskGoSidecar().start(db_path=tmp_path / "dt.sqlite3", log_dir=tmp_path / "logs")
    except DurableTaskGoNotInstalledError as exc:
        pytest.fail(str(exc), pytrace=False)
    with engine:
        ids = support.record(APP, engine.address)
        rc, out, err = support.cli("capture", "--from", engine.address, "--all", "--out", str(tmp_path / "h"))
        assert rc == 0, err
    assert {p.name for p in (tmp_path / "h").glob("*.json")} == \
        {f"{i}.history.json" for i in ids["completed"] + ids["running"]}
    support.check_versions(APP, tmp_path / "h", tmp_path / "r", v2=_dx_v2(tmp_path / "h", ids))


def test_dx_stalls_as_daprd_would(tmp_path: Path) -> None:
    """A removed patch check stalls with PATCH_MISMATCH, a removed version with VERSION_NOT_AVAILABLE,
    each with the description the engine records (taskhub_core's patch rules, as dapr/dapr)."""
    support.require(PYTHON, "install the SDKs with scripts/install-sdks.sh")
    with support.reference_sidecar() as sc:
        ids = support.record(APP, sc.address, "--orders", "0", "--stalls")
        support.capture(sc.address, ids["stalls"], tmp_path / "h")
    rc, got, text = support.replay(tmp_path / "h", APP.command("v1"), tmp_path / "v1")
    assert rc == 0 and {v["verdict"] for v in got.values()} == {"CLEAN"}, text
    rc, got, text = support.replay(tmp_path / "h", APP.command("v3"), tmp_path / "v3")
    assert rc == 1, text
    assert (got["shipping-0"]["verdict"], got["shipping-0"]["stallReason"]) == ("STALL", "PATCH_MISMATCH"), text
    assert got["shipping-0"]["stallDescription"] == \
        "Patch mismatch. History patches: [fast-ship], current patches: []. "
    assert (got["billing-0"]["verdict"], got["billing-0"]["stallReason"]) == ("STALL", "VERSION_NOT_AVAILABLE"), text
    assert got["billing-0"]["stallDescription"] == "Version not available: b1"


@pytest.mark.parametrize("engine", ["reference", "durabletask-go"])
def test_dx_every_feature_replays_cleanly_on_unchanged_code(engine: str, tmp_path: Path) -> None:
    """No false alarm: fan-out, retries (failed attempts and retry timers), child workflows,
    timers and when_any, an event wait with a timeout, continue-as-new and a failing workflow,
    recorded on each engine, replay cleanly on the same code in both modes."""
    support.require(PYTHON, "install the SDKs with scripts/install-sdks.sh")
    h = tmp_path / "h"
    if engine == "reference":
        with support.reference_sidecar() as sc:
            support.record(APP, sc.address, "--orders", "0", "--zoo")
            rc, _, err = support.cli("capture", "--from", sc.address, "--all", "--out", str(h))
    else:
        try:
            dtgo = DurableTaskGoSidecar().start(db_path=tmp_path / "dt.sqlite3", log_dir=tmp_path / "logs")
        except DurableTaskGoNotInstalledError as exc:
            pytest.fail(str(exc), pytrace=False)
        with dtgo:
            support.record(APP, dtgo.address, "--orders", "0", "--zoo")
            rc, _, err = support.cli("capture", "--from", dtgo.address, "--all", "--out", str(h))
    assert rc == 0, err
    names = {support.load(p).name for p in h.glob("*.json")}
    assert {"zoo_fan", "zoo_retry", "zoo_child", "zoo_timers", "zoo_event_timeout", "zoo_counter", "zoo_fails",
            "chain"} <= names
    for mode in ("fast", "turns"):
        rc, got, text = support.replay(h, APP.command("v1"), tmp_path / mode, "--mode", mode)
        assert rc == 0 and {v["verdict"] for v in got.values()} == {"CLEAN"}, text
