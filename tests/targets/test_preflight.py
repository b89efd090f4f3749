"""Errors before work: a target that is not installed stops the run before any scenario, with one
message naming what is missing and the command that installs it from where the user is, exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conformance.targets.base import Pair, WorkerTarget
from conformance.targets.preflight import command_from, not_installed
from conformance.targets.registry import load_targets

ROOT = Path(__file__).resolve().parents[2]


def _library_without_installs(tmp_path: Path) -> Path:
    """A library root with the shipped scenarios and drivers but nothing installed (.sdk/, .tools/ absent)."""
    home = tmp_path / "lib"
    home.mkdir()
    for name in ("scenarios", "drivers", "scripts"):
        (home / name).symlink_to(ROOT / name)
    return home


def test_a_missing_driver_is_one_message_with_the_install_command_and_exit_2(tmp_path):
    home = _library_without_installs(tmp_path)
    env = {**os.environ, "CONFORMANCE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--worker", "dapr-ext-workflow",
                           "--worker", "durabletask-go-worker", "--scenario", "timers/*", "--no-reports"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "", done.stdout  # no scenario ran
    assert f"worker dapr-ext-workflow is not installed ({home}/.sdk/dx/bin/python does not exist)" in done.stderr
    # From tmp_path the library is lib/: the command is relative to where the user is.
    assert "\n    lib/scripts/install-sdks.sh dx\n" in done.stderr + "\n"
    assert "lib/scripts/install-go-driver.sh" in done.stderr


def test_the_install_command_is_written_for_the_working_directory(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    assert command_from(root, "scripts/install-sdks.sh dx", cwd=root) == "scripts/install-sdks.sh dx"
    assert command_from(root, "install.sh", cwd=root) == "./install.sh"
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    assert command_from(root, "scripts/install-js.sh", cwd=elsewhere) == f"{root}/scripts/install-js.sh"


def test_an_installed_worker_and_the_reference_pass(tmp_path):
    targets = load_targets()
    assert not_installed([targets.pair("reference", "reference")], root=ROOT) == []
    mine = WorkerTarget(name="mine", kind="command", capabilities=frozenset(), command="{python} -m fake_worker")
    assert not_installed([Pair(sidecar=targets.sidecars["reference"], worker=mine)], root=ROOT) == []
    gone = WorkerTarget(name="gone", kind="command", capabilities=frozenset(), command="/nonexistent/bin/x --y")
    (problem,) = not_installed([Pair(sidecar=targets.sidecars["reference"], worker=gone)], root=ROOT)
    assert "/nonexistent/bin/x does not exist" in problem and "--worker-command" in problem


def _library_with_a_go_build(tmp_path: Path, stamp: str) -> Path:
    """A library root whose Go driver is "built" (a placeholder binary) with the given stamp. The build
    scripts are copied, not linked: they find the library from their own resolved location."""
    home = tmp_path / "lib"
    (home / "scripts").mkdir(parents=True)
    for script in ("install-go-driver.sh", "install-durabletask-go.sh"):
        shutil.copy2(ROOT / "scripts" / script, home / "scripts" / script)
    shutil.copytree(ROOT / "drivers" / "durabletask_go", home / "drivers" / "durabletask_go")
    binary = home / ".tools" / "bin" / "durabletask-go-driver"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    binary.with_name(binary.name + ".stamp").write_text(stamp)
    return home


def test_a_driver_built_from_older_sources_is_refused_with_the_rebuild_command(tmp_path):
    # The stamp the checkout's own build wrote (./dev test installs the Go driver before the tests).
    stamp = ROOT / ".tools" / "bin" / "durabletask-go-driver.stamp"
    assert stamp.is_file(), f"{stamp} is missing: run scripts/install-go-driver.sh"
    home = _library_with_a_go_build(tmp_path, stamp.read_text())
    targets = load_targets()
    pair = targets.pair("reference", "durabletask-go-worker")
    assert pair.worker.current == "scripts/install-go-driver.sh --check"
    # Same sources as the checkout's build: current (if not, this checkout's own build is stale).
    assert not_installed([pair], root=home, cwd=home) == [], "rebuild: scripts/install-go-driver.sh"
    with (home / "drivers" / "durabletask_go" / "main.go").open("a") as f:
        f.write("\n// an edit after the build\n")
    (problem,) = not_installed([pair], root=home, cwd=home)
    assert problem.startswith("worker durabletask-go-worker needs a rebuild (install-go-driver: out of date:"), problem
    assert problem.endswith("rebuild it with:\n    scripts/install-go-driver.sh"), problem


def test_a_replaced_command_is_not_held_to_the_pinned_drivers_build(tmp_path):
    # --sdk-path / --worker-command run another build of the driver: the pinned one's build check is not theirs.
    home = _library_without_installs(tmp_path)
    targets = load_targets()
    for worker in ("durabletask-java", "durabletask-go-worker"):
        assert targets.workers[worker].current, f"{worker} has no current: check to leave out"
        pair = targets.pair("reference", worker, worker_command=f"{sys.executable} --sidecar {{address}}")
        assert not_installed([pair], root=home, cwd=home) == []
