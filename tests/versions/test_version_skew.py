"""The version matrix and the corpus with real SDK releases: the subset CI runs.

The three durabletask-dapr releases on the reference engine for a few scenarios (each release in its
cached environment, made on first use), and histories the corpus holds from one release replayed on
another. The whole matrix is `conformance versions --sdk NAME` (docs/versions.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conformance.cli import main as conformance_main

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "histories"
SCENARIOS = ("activities/chain", "activities/failure-becomes-task-failed", "timers/past-fire-at-fires-at-once")


def test_three_releases_of_durabletask_dapr_on_the_reference_engine(tmp_path: Path) -> None:
    args = ["versions", "--sdk", "durabletask-dapr", "--reports", str(tmp_path)]
    for s in SCENARIOS:
        args += ["--scenario", s]
    rc = conformance_main(args)
    doc = json.loads((tmp_path / "versions.json").read_text())
    cells = doc["cells"]
    assert [c["sdkVersion"] for c in cells] == ["0.17.4", "0.17.3", "0.17.2"]
    for c in cells:
        assert not c["setupError"], c
        assert c["counts"].get("PASSED") == len(SCENARIOS), c
        assert c["mustBroken"] == [] and c["failed"] == {}
    assert rc == 0
    assert "| durabletask-dapr 0.17.2 | 3 pass" in (tmp_path / "versions.md").read_text()


def _recorded_with(sdk: str, version: str, scenario: str) -> Path:
    found = sorted((CORPUS / scenario).glob(f"*/{sdk}-{version}/*.history.json"))
    assert found, f"histories/{scenario} holds no history recorded with {sdk} {version}"
    return found[0]


def test_histories_of_an_older_release_replay_cleanly_on_a_newer_one(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for s in SCENARIOS:
        src = _recorded_with("durabletask-dapr", "0.17.2", s)
        dest = corpus / s / src.parent.relative_to(CORPUS / s)
        dest.mkdir(parents=True)
        shutil.copy2(src, dest / src.name)
        shutil.copy2(CORPUS / s / "bundle.json", corpus / s / "bundle.json")
    rc = conformance_main(["replay", "--corpus", str(corpus), "--sdk", "durabletask-dapr@0.17.4",
                           "--reports", str(tmp_path / "r")])
    text = (tmp_path / "r" / "corpus-replay.md").read_text()
    assert "| reference this-checkout with durabletask-dapr 0.17.2 | 3 | 3 | 0 |" in text, text
    assert rc == 0, text


def test_a_history_that_does_not_fit_the_programs_is_reported(tmp_path: Path) -> None:
    """The replay can fail: a history of one scenario replayed with another scenario's programs."""
    corpus = tmp_path / "corpus"
    src = _recorded_with("durabletask-dapr", "0.17.2", "activities/chain")
    dest = corpus / "activities/chain" / src.parent.relative_to(CORPUS / "activities/chain")
    dest.mkdir(parents=True)
    shutil.copy2(src, dest / src.name)
    shutil.copy2(CORPUS / "timers/past-fire-at-fires-at-once" / "bundle.json", corpus / "activities/chain/bundle.json")
    rc = conformance_main(["replay", "--corpus", str(corpus), "--sdk", "durabletask-dapr@0.17.4",
                           "--reports", str(tmp_path / "r")])
    text = (tmp_path / "r" / "corpus-replay.md").read_text()
    assert rc == 1 and "| 1 | 0 | 1 |" in text, text


GO_EXPLAINED = ("late/all-keeps-event-after-stale-timeout", "late/same-name-wait-after-stale-timeout",
                "lifecycle/terminate-suspended")


def test_go_histories_on_an_older_go_release_fail_only_as_explained(tmp_path: Path) -> None:
    """durabletask-go v0.14.0's histories replayed on v0.12.1: the three histories/explained.yaml traces fail
    as it says and name their upstream fix; the others replay cleanly."""
    args = ["replay", "--corpus", str(CORPUS), "--sdk", "durabletask-go@v0.12.1",
            "--recorded", "reference-*/durabletask-go-v0.14.0", "--reports", str(tmp_path)]
    for s in (*GO_EXPLAINED, "activities/chain", "lifecycle/events-while-suspended-are-kept"):
        args += ["--scenario", s]
    rc = conformance_main(args)
    text = (tmp_path / "corpus-replay.md").read_text()
    assert "| reference this-checkout with durabletask-go v0.14.0 | 5 | 2 | 3 |" in text, text
    assert "## What does not replay cleanly, untraced\n\nNothing." in text, text
    for s in GO_EXPLAINED:
        assert f"- `{s}/reference-this-checkout/durabletask-go-v0.14.0/" in text, text
    assert text.count("fixed by: dapr/durabletask-go#114") == 2 and "fixed by: dapr/durabletask-go#123" in text
    assert rc == 0, text
