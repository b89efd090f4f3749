"""`conformance capture` + `conformance replay` with a real durabletask-dapr application
(tests/replay/apps/dd_orders.py, run with the SDK's own virtualenv .sdk/dd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replay import support

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

PYTHON = support.REPO / ".sdk" / "dd" / "bin" / "python"
APP = support.App("dd", (str(PYTHON), str(support.APPS / "dd_orders.py")))


def test_dd_histories_from_the_reference_sidecar(tmp_path: Path) -> None:
    support.require(PYTHON, "install the SDKs with scripts/install-sdks.sh")
    with support.reference_sidecar() as sc:
        ids = support.record(APP, sc.address)
        support.capture(sc.address, ids["completed"] + ids["running"], tmp_path / "h")
    # dd records nothing for a wait: in the completed instance v2's `audit` takes the id history
    # gave `charge`; the running one has not got there yet, so it replays cleanly.
    done, waiting = ids["completed"][0], ids["running"][0]
    v2 = {done: support.after_reserve(tmp_path / "h" / f"{done}.history.json", "taskScheduled", name="charge"),
          waiting: None}
    support.check_versions(APP, tmp_path / "h", tmp_path / "r", v2=v2)
