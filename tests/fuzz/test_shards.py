"""Sharded campaigns share findings through one Hypothesis example database (conformance/fuzz/shards.py).

Two shards of one campaign (same seed, their own random draws) run one after the other on one
directory database: what the first found and shrank, the second replays among its first examples
instead of searching for it again; the same shard on an empty database has to search (so the check
can fail). Then two `conformance fuzz --shard I/2` processes run at once on one database and
`--merge-shards` makes one report of both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.fuzz.common import Budget
from conformance.fuzz.shards import Shard, merge
from conformance.fuzz.worker_fuzz import WorkerCampaign
from conformance.fuzz.workers import FunctionWorker
from tests.mutants.variants import WORKER_MUTATIONS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = 60


pytestmark = pytest.mark.usefixtures("quiet_logs")


def shard(database: Path, index: int) -> dict[str, int]:
    """Finding key -> the example of the shard that first raised it."""
    mutation = WORKER_MUTATIONS["reorders-actions"]
    campaign = WorkerCampaign(target="mutant:reorders-actions", budget=Budget(examples=EXAMPLES), seed=3,
                              make_worker=lambda bundle, doc: FunctionWorker(bundle, mutation, name="mutant"),
                              fresh_process=False, database=database, shard=index, chunk=EXAMPLES,
                              round_examples=EXAMPLES)
    return {f.key: f.at_example for f in campaign.run()}


def test_a_finding_of_one_shard_is_replayed_by_the_other(tmp_path):
    first = shard(tmp_path / "shared", 0)
    assert first, f"shard 1 found nothing in {EXAMPLES} examples: the mutant is not found at all"
    second = shard(tmp_path / "shared", 1)
    alone = shard(tmp_path / "own", 1)
    # Hypothesis' reuse phase runs the saved examples before it draws any: shard 2's first example
    # is one of shard 1's findings, replayed (one per chunk: a finding ends a chunk's search).
    replayed = [k for k, n in second.items() if n == 1]
    assert replayed and set(replayed) <= set(first), f"shard 2 did not replay shard 1's findings first: {first} vs {second}"
    # Without the shared database the same shard has to search (its first finding comes later).
    assert min(alone.values(), default=EXAMPLES + 1) > 1, alone


def test_shards_run_at_once_and_merge_into_one_report(tmp_path):
    db = tmp_path / "db"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "conformance", "fuzz", "--worker", "reference", "--budget", "8", "--seed", "2",
           "--database", str(db), "--no-write", "--no-differential", "-q"]
    procs = [subprocess.Popen(cmd + ["--shard", f"{i}/2"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in (1, 2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(p.name for p in (db / "shards").iterdir()) == ["shard-1-of-2.json", "shard-2-of-2.json"]
    merged = merge(db)
    assert merged.shards == 2 and merged.findings == 0, merged.text
    assert "16 examples over shards 1" in merged.text, merged.text
    done = subprocess.run([sys.executable, "-m", "conformance", "fuzz", "--merge-shards", str(db)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "merged report of 2 shard(s)" in done.stdout, done.stdout + done.stderr


def test_bad_shard_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="I/N"):
        Shard.parse("3/2")
    with pytest.raises(FileNotFoundError, match="no shard reports"):
        merge(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "conformance", "fuzz", "--shard", "0/2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--shard '0/2'" in done.stderr, done.stderr
