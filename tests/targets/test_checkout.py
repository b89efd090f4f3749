"""--sdk-path: which SDK a local checkout holds, in the layouts their authors keep today, and a clear error
naming what is wrong when a folder is not one (exit 2, before any scenario)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.targets.checkout import CheckoutError, detect

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def python_sdk(root: Path, *, merged: bool) -> Path:
    write(root / "pyproject.toml", '[project]\nname = "dapr"\ndynamic = ["version"]\n')
    if merged:
        write(root / "dapr" / "ext" / "workflow" / "__init__.py")
    else:
        write(root / "ext" / "dapr-ext-workflow" / "pyproject.toml", '[project]\nname = "dapr-ext-workflow"\n')
    return root


def test_python_sdk_both_layouts_and_the_old_ext_folder(tmp_path):
    old = detect(python_sdk(tmp_path / "old", merged=False))
    assert (old.worker, old.editable) == ("dapr-ext-workflow", (tmp_path / "old", tmp_path / "old/ext/dapr-ext-workflow"))
    # The folder the README of old named is taken as its repository root (so dapr comes from the checkout too).
    assert detect(tmp_path / "old" / "ext" / "dapr-ext-workflow").root == tmp_path / "old"
    merged = detect(python_sdk(tmp_path / "new", merged=True))
    assert (merged.worker, merged.editable) == ("dapr", (tmp_path / "new",))
    assert "workflow inside dapr" in merged.layout
    as_ext = detect(tmp_path / "new", worker="dapr-ext-workflow")
    assert as_ext.worker == "dapr-ext-workflow" and as_ext.env_dir == merged.env_dir  # one environment per checkout
    # One environment per checkout.
    assert old.env_dir != merged.env_dir and old.env_dir == detect(tmp_path / "old").env_dir


def test_the_other_four_sdks(tmp_path):
    write(tmp_path / "py" / "pyproject.toml", '[project]\nname = "durabletask-dapr"\n')
    write(tmp_path / "js" / "package.json", '{"name": "@dapr/durabletask-js", "version": "1.0.0"}')
    write(tmp_path / "go" / "go.mod", "module github.com/dapr/durabletask-go\n\ngo 1.26.0\n")
    write(tmp_path / "java" / "settings.gradle", "rootProject.name = 'durabletask-java'\ninclude ':client'\n")
    (tmp_path / "java" / "client" / "src" / "main" / "java").mkdir(parents=True)
    write(tmp_path / "java-sdk" / "pom.xml", "<project><artifactId>dapr-sdk-parent</artifactId></project>")
    write(tmp_path / "java-sdk" / "durabletask-client" / "pom.xml", "<project/>")
    assert detect(tmp_path / "java-sdk").layout == "java-sdk (durabletask-client module)"
    found = {name: detect(tmp_path / name).worker for name in ("py", "js", "go", "java", "java-sdk")}
    assert found == {"py": "durabletask-dapr", "js": "durabletask-js", "go": "durabletask-go-worker",
                     "java": "durabletask-java", "java-sdk": "durabletask-java"}


@pytest.mark.parametrize("make, says", [
    (lambda p: None, "no such folder"),
    (lambda p: write(p / "pyproject.toml", '[project]\nname = "requests"\n'), "its pyproject.toml declares 'requests'"),
    (lambda p: write(p / "go.mod", "module example.com/x\n"), "its go.mod says 'module example.com/x'"),
    (lambda p: p.mkdir(), "no pyproject.toml, setup.py, package.json, go.mod or settings.gradle there"),
])
def test_a_folder_that_is_not_an_sdk_says_what_it_is(tmp_path, make, says):
    make(tmp_path / "x")
    with pytest.raises(CheckoutError) as err:
        detect(tmp_path / "x")
    assert says in str(err.value) and str(tmp_path / "x") in str(err.value)


def test_a_checkout_of_another_sdk_names_the_worker_to_use(tmp_path):
    write(tmp_path / "go" / "go.mod", "module github.com/dapr/durabletask-go\n")
    with pytest.raises(CheckoutError) as err:
        detect(tmp_path / "go", worker="dapr-ext-workflow")
    assert "the SDK of worker durabletask-go-worker, not of dapr-ext-workflow" in str(err.value)
    assert "--worker durabletask-go-worker" in str(err.value)


def test_run_refuses_a_folder_that_is_not_an_sdk_before_any_scenario_with_exit_2(tmp_path):
    write(tmp_path / "notsdk" / "setup.py", "")
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--worker", "dapr-ext-workflow",
                           "--sdk-path", "notsdk", "--no-reports"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("conformance: --sdk-path notsdk: not a checkout of a known SDK (a setup.py of")
