"""`conformance capture` + `conformance replay` with a real Go SDK application
(tests/replay/apps/go_orders, github.com/dapr/durabletask-go v0.14.0), built offline from the
project's module cache in .tools (as scripts/install-go-driver.sh builds the Go driver)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.replay import support

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

SRC = support.APPS / "go_orders"
TOOLS = support.REPO / ".tools"
BUILD_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def go_app(tmp_path_factory: pytest.TempPathFactory) -> support.App:
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: install Go >= 1.26", pytrace=False)
    support.require(TOOLS / "go" / "pkg" / "mod" / "github.com" / "dapr" / "durabletask-go@v0.14.0",
                    "fill the module cache with scripts/install-go-driver.sh")
    binary = tmp_path_factory.mktemp("go") / "go_orders"
    env = dict(os.environ, GOPATH=str(TOOLS / "go"), GOMODCACHE=str(TOOLS / "go" / "pkg" / "mod"),
               GOCACHE=str(TOOLS / "go-build"), CGO_ENABLED="0", GOTOOLCHAIN="local",
               GOFLAGS="-mod=readonly -modcacherw -trimpath", GOPROXY="off")
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SRC, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"go build of {SRC} failed:\n{done.stderr[-4000:]}"
    return support.App("go", (str(binary),))


def test_go_histories_from_the_reference_sidecar(go_app: support.App, tmp_path: Path) -> None:
    with support.reference_sidecar() as sc:
        ids = support.record(go_app, sc.address)
        support.capture(sc.address, ids["completed"] + ids["running"], tmp_path / "h")
    # Like dx, the Go SDK waits for an event behind a timer it records (named after the event), so
    # in both instances v2's `audit` takes that TimerCreated's id.
    v2 = {iid: support.after_reserve(tmp_path / "h" / f"{iid}.history.json", "timerCreated")
          for iid in ids["completed"] + ids["running"]}
    support.check_versions(go_app, tmp_path / "h", tmp_path / "r", v2=v2)
