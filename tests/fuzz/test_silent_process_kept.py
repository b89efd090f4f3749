"""A driver process that leaves one turn unanswered but answers the rest is kept, not restarted.

durabletask-java 1.17.1 drops a turn whose error path throws again ("The orchestrator has already
completed"): the JVM is fine, and restarting it for every such turn cost a fuzz campaign seconds of
CPU per silent turn. `DriverPool` now restarts a silent process only when it stopped answering or a
thread of it is looping (`workers.looping`). These run real processes: the reference worker told to
never answer one instance (its `never_complete` adversary rule), and a Python process spinning.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

from taskhub_programs import parse_bundle

from conformance.fuzz.interleave import RandomChooser, run_program
from conformance.fuzz.workers import DriverPool, DriverWorker, looping, wait_until
from conformance.targets.registry import load_targets

PROGRAMS = {"p0": {"steps": [{"return": "done"}]}}


def _case(bundle, instance_id: str):
    run = run_program(bundle, "p0", None, RandomChooser(random.Random(0)), instance_id=instance_id, max_turns=1)
    return run.cases[0]


def _silent_on(tmp_path, match: dict):
    """A worker target: the reference worker, silent on the workflow turns `match` selects."""
    rules = json.dumps([{"mode": "never_complete", "match": {"kind": "workflow", **match}}])
    (tmp_path / "rules.json").write_text(rules, encoding="utf-8")
    targets = tmp_path / "targets.yaml"
    targets.write_text(textwrap.dedent(f"""\
        workers:
          dropper:
            kind: command
            command: "{sys.executable} -m fake_worker --sidecar {{address}} --programs {{programs}} --adversary {tmp_path / 'rules.json'}"
            ready_line: "^connected to "
        """), encoding="utf-8")
    return load_targets(extra=[targets]).worker("dropper")


def _pool(target, bundle) -> DriverPool:
    # A short cap: before 20 answers a process's patience is the cap (workers.Latency).
    return DriverPool(lambda: DriverWorker(target, bundle, PROGRAMS, timeout=2.0), streams=2, concurrency=2)


def test_a_process_that_drops_one_turn_is_kept(tmp_path):
    bundle = parse_bundle({"programs": PROGRAMS})
    pool = _pool(_silent_on(tmp_path, {"instance_id": "drop-me"}), bundle)
    try:
        assert pool.warm_up([_case(bundle, "warm-up-0")]) == 2
        pids = [w.handle.proc.pid for w in pool.workers]
        assert pool.answer(_case(bundle, "drop-me"), stream=0) is None  # silent on both processes
        assert wait_until(lambda: not pool._down, timeout=30), "the silent processes' checks never ended"
        assert pool.counters()["silent"] == 1
        assert pool.counters()["kept"] == 2, pool.counters()
        assert [w.handle.proc.pid for w in pool.workers] == pids  # nothing restarted
        assert sum(w.starts for w in pool.workers) == 2
        got = pool.answer(_case(bundle, "after"), stream=0)
        assert got is not None and got.instanceId == "after"
    finally:
        pool.close()
    assert not any(w.work_dir.exists() for w in pool.workers)  # the folders it made are gone with it


def test_a_process_that_answers_nothing_is_restarted(tmp_path):
    bundle = parse_bundle({"programs": PROGRAMS})
    pool = _pool(_silent_on(tmp_path, {}), bundle)
    try:
        pids = [w.handle.proc.pid for w in pool.workers]
        assert pool.answer(_case(bundle, "any"), stream=0) is None
        assert wait_until(lambda: not pool._down, timeout=30), "the silent processes were never replaced"
        assert pool.counters()["kept"] == 0, pool.counters()
        assert sum(w.starts for w in pool.workers) == 4
        assert all(w.alive() for w in pool.workers)
        assert not {w.handle.proc.pid for w in pool.workers} & set(pids)
    finally:
        pool.close()


def test_a_looping_thread_is_seen_and_a_sleeping_process_is_not():
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rest = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert looping(spin.pid) is True
        assert looping(rest.pid) is False
    finally:
        for p in (spin, rest):
            p.kill()
            p.wait()
    assert looping(spin.pid) is None  # gone
