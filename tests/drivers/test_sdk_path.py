"""An SDK from a local checkout instead of the pin (`scripts/install-sdks.sh dd --sdk-path PATH`, what
`./dev sdk durabletask-dapr --sdk-path PATH` runs): installed beside the pinned venv, then run as
the built-in target with only its command replaced, it gets the built-in target's verdicts.

The "checkout" is the pinned release's own source distribution from PyPI, unpacked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conformance.events import ScenarioFinished
from conformance.reporting import read_events

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("activities/*", "vectors/first-turn-activity", "events/raise-delivered-and-recorded")

pytestmark = [pytest.mark.sdk, pytest.mark.slow]


def _pin() -> str:
    lines = (ROOT / "drivers" / "sdk_envs" / "dd.txt").read_text().splitlines()
    return next(line.strip() for line in lines if line.startswith("durabletask-dapr=="))


def _verdicts(tmp_path: Path, name: str, *options: str) -> dict[str, str]:
    selection = [a for s in SCENARIOS for a in ("--scenario", s)]
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--worker", "durabletask-dapr", *selection,
                           *options, "--jobs", "2", "--reports", str(tmp_path / name)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return {e.scenario: e.outcome.value for e in read_events(tmp_path / name / "events.jsonl")
            if isinstance(e, ScenarioFinished)}


def test_sdk_from_a_local_checkout_runs_as_the_built_in_target(tmp_path: Path) -> None:
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                          "--dest", str(tmp_path / "dl"), _pin()], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    (sdist,) = (tmp_path / "dl").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (checkout,) = (tmp_path / "src").iterdir()

    env = dict(os.environ, SDK_DIR=str(tmp_path / "sdk"))
    bad = subprocess.run([str(ROOT / "scripts" / "install-sdks.sh"), "dd", "--sdk-path", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 1 and "no pyproject.toml or setup.py there" in bad.stderr, bad.stderr
    done = subprocess.run([str(ROOT / "scripts" / "install-sdks.sh"), "dd", "--sdk-path", str(checkout)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    venv = tmp_path / "sdk" / "dd-custom"
    assert f"durabletask-dapr @ file://{checkout}" in (venv / ".installed").read_text()

    command = (f"{venv}/bin/python {{root}}/drivers/durabletask_dapr/driver.py "
               "--sidecar {address} --programs {programs}")
    custom = _verdicts(tmp_path, "custom", "--worker-command", command)
    assert custom == _verdicts(tmp_path, "pinned")
    assert "PASSED" in custom.values() and len(custom) > 3, custom
