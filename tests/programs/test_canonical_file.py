"""A command worker is handed its programs twice: as written ({programs}) and in the canonical form ({canonical})."""

from __future__ import annotations

import json
from pathlib import Path

import taskhub_programs as P
from conformance.targets.base import WorkerStart
from conformance.targets.external import start_command_worker, write_bundle

PROGRAMS = {"main": {"steps": [{"timer": "2s"}, {"return": "done ${input}"}]}}


def _spec(tmp_path: Path) -> WorkerStart:
    return WorkerStart(address="127.0.0.1:1", bundle=P.parse_bundle({"programs": PROGRAMS}), bundle_doc=PROGRAMS,
                       work_dir=tmp_path, ledger=tmp_path / "ledger.jsonl")


def test_both_files_are_written(tmp_path: Path):
    raw, canonical = write_bundle(_spec(tmp_path))
    assert json.loads(raw.read_text()) == {"programs": PROGRAMS}  # what the drivers read today, unchanged
    assert json.loads(canonical.read_text()) == P.canonical_form(PROGRAMS)
    assert canonical.name == raw.name.removesuffix(".json") + ".canonical.json"


def test_the_canonical_placeholder_reaches_the_command(tmp_path: Path):
    seen = tmp_path / "seen.json"
    # A stand-in driver: copies the file it is given, says it is connected, and waits to be stopped.
    code = ("import shutil, sys, threading; shutil.copy(sys.argv[1], sys.argv[2]); "
            "print('connected to x', flush=True); threading.Event().wait()")
    worker = start_command_worker(_spec(tmp_path), name="stand-in",
                                  command=["{python}", "-c", code, "{canonical}", str(seen)])
    try:
        form = json.loads(seen.read_text())
    finally:
        worker.stop()
    assert form["programs"]["main"]["versions"][0]["steps"][0] == {"step": "timer", "duration": 2.0, "as": None}
