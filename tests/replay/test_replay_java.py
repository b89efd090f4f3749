"""`conformance capture` + `conformance replay` with a real Java SDK application
(tests/replay/apps/java_orders, io.dapr:durabletask-client 1.17.1), compiled with javac against
the SDK jars scripts/install-java-driver.sh put in .tools/java-driver/lib."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.replay import support

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

SRC = support.APPS / "java_orders" / "JavaOrders.java"
LIB = support.REPO / ".tools" / "java-driver" / "lib"
BUILD_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def java_app(tmp_path_factory: pytest.TempPathFactory) -> support.App:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.fail("javac/java are not on PATH: install a JDK >= 17", pytrace=False)
    support.require(LIB, "build the Java driver with scripts/install-java-driver.sh (it fetches the SDK's jars)")
    classes = tmp_path_factory.mktemp("java")
    done = subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", f"{LIB}/*", str(SRC)], capture_output=True,
                          text=True, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"javac {SRC} failed:\n{done.stderr[-4000:]}"
    return support.App("java", (java, "-cp", f"{LIB}/*{os.pathsep}{classes}", "JavaOrders"))


def test_java_histories_from_the_reference_sidecar(java_app: support.App, tmp_path: Path) -> None:
    with support.reference_sidecar() as sc:
        ids = support.record(java_app, sc.address)
        support.capture(sc.address, ids["completed"] + ids["running"], tmp_path / "h")
    h = tmp_path / "h"
    done, waiting = ids["completed"][0], ids["running"][0]
    # Which event v2's `audit` collides with depends on what the SDK records for a wait: a timer
    # (as dx and Go do) or nothing (as dd and js do); read it from the recorded history.
    if any(e.HasField("timerCreated") for e in support.load(h / f"{done}.history.json").events):
        v2 = {iid: support.after_reserve(h / f"{iid}.history.json", "timerCreated") for iid in (done, waiting)}
    else:
        v2 = {done: support.after_reserve(h / f"{done}.history.json", "taskScheduled", name="charge"), waiting: None}
    support.check_versions(java_app, h, tmp_path / "r", v2=v2)
