"""The package as its users get it: the sdist is built, the wheel built from it is installed into a fresh
venv, and every command runs from a directory outside the checkout.

Dependencies come from the package index (pip's cache makes a rerun cheap); the checkout is
never on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONFORMANCE_HOME", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(argv: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the venv's bin folder, an empty working directory outside the checkout, the wheel)."""
    base = tmp_path_factory.mktemp("installed")
    dist = base / "dist"
    # No --sdist/--wheel: build makes the sdist, then the wheel from the unpacked sdist (what tox and PyPI users get).
    built = _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=base)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = list(dist.glob("*.whl"))
    assert len(wheels) == 1 and list(dist.glob("*.tar.gz")), list(dist.iterdir())
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    assert made.returncode == 0, made.stderr
    pip = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheels[0])], cwd=base)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    work = base / "elsewhere"
    work.mkdir()
    return venv / "bin", work, wheels[0]


def test_the_wheel_carries_the_library_and_no_build_output(installed):
    names = zipfile.ZipFile(installed[2]).namelist()
    shipped = {n.removeprefix("conformance_library/scenarios/") for n in names
               if n.startswith("conformance_library/scenarios/") and n.endswith(".yaml")}
    assert shipped == {p.relative_to(ROOT / "scenarios").as_posix() for p in (ROOT / "scenarios").rglob("*.yaml")}
    for needed in ("conformance/requirements.yaml", "conformance/scenario/scenario.schema.json",
                   "conformance/targets/targets.yaml", "taskhub_programs/program.schema.json",
                   "conformance_library/drivers/dapr_ext_workflow/driver.py",
                   "conformance_library/drivers/dapr_ext_workflow/target.yaml",
                   "conformance_library/drivers/durabletask_js/driver.js",
                   "conformance_library/drivers/durabletask_java/pom.xml",
                   "conformance_library/drivers/durabletask_java/checkout-client.pom.xml",  # --sdk-path, Gradle layout
                   "conformance_library/scripts/install-sdks.sh"):
        assert needed in names, needed
    assert not [n for n in names if "node_modules" in n or "__pycache__" in n or "/target/classes" in n]
    # Every data file of our packages (schemas, catalogue, protos, drift dumpers...) is in the wheel.
    packages = ("conformance", "fake_sidecar", "fake_worker", "taskhub_wire", "taskhub_programs")
    data = {p.relative_to(ROOT).as_posix() for package in packages
            for p in (ROOT / package).rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")}
    assert data - set(names) == set()


def test_version_list_validate_and_targets_from_elsewhere(installed):
    bin_dir, work, _ = installed
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = _run([str(bin_dir / "conformance"), "--version"], cwd=work)
    assert out.returncode == 0 and out.stdout.splitlines()[0] == f"conformance {version}", out.stdout + out.stderr
    assert "(installed package data)" in out.stdout.splitlines()[1]  # and where the library is
    where = _run([str(bin_dir / "python"), "-c", "import conformance; print(conformance.__file__)"], cwd=work)
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent), where.stdout  # not the checkout

    listed = _run([str(bin_dir / "conformance"), "list"], cwd=work)
    count = len(list((ROOT / "scenarios").rglob("*.yaml")))
    assert listed.returncode == 0 and listed.stdout.strip().endswith(f"{count} scenario(s)"), listed.stderr
    valid = _run([str(bin_dir / "conformance"), "validate"], cwd=work)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    targets = _run([str(bin_dir / "conformance"), "targets"], cwd=work)
    assert targets.returncode == 0 and "dapr-ext-workflow" in targets.stdout, targets.stderr


def test_run_and_fuzz_from_elsewhere(installed):
    bin_dir, work, _ = installed
    run = _run([str(bin_dir / "conformance"), "run", "--scenario", "activities/*", "--scenario", "vectors/first-turn-activity",
                "--jobs", "2"], cwd=work)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stdout + run.stderr
    assert " passed, 0 failed" in run.stdout
    for name in ("events.jsonl", "junit.xml", "matrix.html"):
        assert (work / "reports" / name).is_file(), name  # in the working directory, not in site-packages
    assert not list(bin_dir.parent.glob("lib/python*/site-packages/reports"))

    fuzz = _run([str(bin_dir / "conformance"), "fuzz", "--sidecar", "reference", "--budget", "10", "--no-database",
                 "--no-write"], cwd=work)
    assert fuzz.returncode == 0 and "Traceback" not in fuzz.stderr, fuzz.stdout[-2000:] + fuzz.stderr[-2000:]
