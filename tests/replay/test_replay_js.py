"""`conformance capture` + `conformance replay` with a real @dapr/durabletask-js application
(tests/replay/apps/js_orders.js, run by node with the SDK installed for the driver,
drivers/durabletask_js/node_modules). The SDK has no patching API: no v2-patched replay."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.replay import support

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

MODULES = support.REPO / "drivers" / "durabletask_js" / "node_modules"
APP = support.App("js", ("env", f"NODE_PATH={MODULES}", shutil.which("node") or "node",
                         str(support.APPS / "js_orders.js")))


def test_js_histories_from_the_reference_sidecar(tmp_path: Path) -> None:
    support.require(MODULES / "@dapr" / "durabletask-js", "install it with scripts/install-js.sh")
    with support.reference_sidecar() as sc:
        ids = support.record(APP, sc.address)
        support.capture(sc.address, ids["completed"] + ids["running"], tmp_path / "h")
    # Like dd, the SDK records nothing for a wait (no sentinel timer).
    done, waiting = ids["completed"][0], ids["running"][0]
    v2 = {done: support.after_reserve(tmp_path / "h" / f"{done}.history.json", "taskScheduled", name="charge"),
          waiting: None}
    support.check_versions(APP, tmp_path / "h", tmp_path / "r", v2=v2, patched=False)
