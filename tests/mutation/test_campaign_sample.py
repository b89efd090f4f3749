"""CI's sample campaign on the real dapr-ext-workflow executor: five mutants drawn with a fixed seed,
plus one known to be killable, against a line map of two event scenarios.

It checks the machinery end to end: the known mutant (an event's task never marked complete) is
killed by a scenario that passed on the unmutated SDK, every drawn mutant gets a status, the reports
are well formed, and the cached install is left byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.mutation.campaign import STATUSES
from conformance.mutation.mutants import enumerate_mutants, sample
from conformance.mutation.sdks import SDKS, scopes, site_packages

pytestmark = [pytest.mark.sdk, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SDK = "dapr-ext-workflow"
KILLABLE = "dapr/ext/workflow/_durabletask/task.py:454:core/ReplaceTrueWithFalse#5"  # complete() leaves it incomplete
SCENARIOS = ("events/distinct-equal-events-both-kept", "events/raise-delivered-and-recorded")
SEED, SIZE = 1, 5


def _hashes(venv: Path) -> dict[str, str]:
    site = site_packages(venv)
    return {s.relpath: hashlib.sha256((site / s.relpath).read_bytes()).hexdigest()
            for s in scopes(SDKS[SDK], venv=venv)}


def test_sample_campaign_kills_the_known_mutant_and_writes_a_well_formed_report(tmp_path: Path):
    installed = ROOT / ".sdk" / SDKS[SDK].venv
    if not (installed / "bin" / "python").exists():
        pytest.fail(f"{installed} is missing: run scripts/install-sdks.sh dx (./dev test does)")
    before = _hashes(installed)
    argv = [sys.executable, "-m", "conformance", "mutate", SDK, "--sample", str(SIZE), "--seed", str(SEED),
            "--mutant", KILLABLE, "--work", str(tmp_path / "work"), "--reports", str(tmp_path / "reports")]
    for sid in SCENARIOS:
        argv += ["--scenario", sid]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _hashes(installed) == before, "the campaign wrote into the cached install"

    doc = json.loads((tmp_path / "reports" / f"{SDK}.json").read_text(encoding="utf-8"))
    population = enumerate_mutants(site=site_packages(installed), scopes=scopes(SDKS[SDK], venv=installed))
    drawn = {m.id for m in sample(population, size=SIZE, seed=SEED)}
    ids = [m["id"] for m in doc["mutants"]]
    assert set(ids) == drawn | {KILLABLE} and len(ids) == len(set(ids))
    assert doc["population"] == len(population) and doc["sdk"] == SDK and doc["seed"] == SEED
    assert doc["baseline_scenarios"] == len(SCENARIOS) and doc["baseline_passed"] == len(SCENARIOS)
    assert sum(doc["counts"].values()) == len(ids) and set(doc["counts"]) == set(STATUSES)
    for m in doc["mutants"]:
        assert m["status"] in STATUSES
        assert m["diff"].startswith(f"--- a/{m['relpath']}"), m
        if m["status"] in ("killed", "survived", "timeout"):
            assert m["scenarios_run"] and set(m["scenarios_run"]) <= set(SCENARIOS)

    known = next(m for m in doc["mutants"] if m["id"] == KILLABLE)
    assert known["status"] == "killed", known
    assert known["killed_by"] and known["killed_by"][0].split(":")[0] in SCENARIOS
    judged = doc["judged"]
    assert doc["score"] == round((doc["counts"]["killed"] + doc["counts"]["timeout"]) / judged, 4)

    md = (tmp_path / "reports" / f"{SDK}.md").read_text(encoding="utf-8")
    assert md.startswith(f"# Mutation score: {SDK} ")
    assert f"### `{KILLABLE}`" in md and "-        self._is_complete = True" in md
