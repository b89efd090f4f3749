"""`conformance run --processes N`: the scenarios in child processes give the verdicts of one process, a
scenario that needs a shared engine alone still runs alone, and a child that dies loses no result."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from conformance.events import Event, ScenarioFinished, ScenarioStarted
from conformance.run_options import RunOptions, prepare_run
from conformance.runner import Plan
from conformance.runner.isolation import needs_engine_alone
from conformance.runner.processes import ChildRun, _Engines, run_in_processes
from conformance.scenario.loader import load_scenario
from conformance.targets.reference import start_reference_sidecar
from conformance.targets.registry import load_targets
from conformance.verdict import Outcome

ROOT = Path(__file__).resolve().parents[2]
ALONE = "connection/worker-reconnects-after-cut"  # cuts the worker's streams: needs a shared engine alone

GOOD = """title: a short flow
requirements: [ACT-RESULT-001]
programs:
  main:
    steps:
      - call_activity: {{name: echo, input: {n}}}
        as: a
      - return: "${{a}}"
start: {{workflow: main}}
expect: {{status: COMPLETED, output: {n}}}
"""


def _library(tmp_path: Path) -> Path:
    """Three passing flows, one whose expectation is wrong (FAILED), and a library scenario that runs alone."""
    root = tmp_path / "lib"
    for n in range(3):
        (root / "flows").mkdir(parents=True, exist_ok=True)
        (root / "flows" / f"ok{n}.yaml").write_text(GOOD.format(n=n), encoding="utf-8")
    (root / "flows" / "wrong.yaml").write_text(GOOD.format(n=5).replace("output: 5", "output: 6"), encoding="utf-8")
    (root / ALONE).parent.mkdir(parents=True)
    shutil.copy(ROOT / "scenarios" / f"{ALONE}.yaml", root / f"{ALONE}.yaml")
    return root


def _verdicts(reports: Path) -> tuple[dict[str, str], dict, dict]:
    """Per scenario its outcome (events.jsonl), and summary.json's verdicts per requirement and counts."""
    events = [json.loads(line) for line in (reports / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_finished"
    finished = [e for e in events if e["kind"] == "scenario_finished"]
    outcomes = {e["scenario"]: e["outcome"] for e in finished}
    assert len(outcomes) == len(finished)  # one result each
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    return outcomes, summary["requirements"], summary["counts"]


def test_child_processes_give_the_verdicts_of_one_process_on_a_shared_engine(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    engine = start_reference_sidecar(options={}, work_dir=tmp_path)
    try:
        outcomes = {}
        for processes in ("1", "2"):
            done = subprocess.run([sys.executable, "-m", "conformance", "run", "--scenarios", str(lib),
                                   "--sidecar", "address", "--sidecar-address", engine.address,
                                   "--processes", processes, "--jobs", "2",
                                   "--reports", str(tmp_path / f"rep{processes}")],
                                  capture_output=True, text=True, timeout=600, cwd=ROOT)
            assert done.returncode == 1, done.stdout + done.stderr  # the wrong expectation fails the run
            assert "Traceback" not in done.stderr, done.stderr
            assert done.stdout.strip().splitlines()[-2] == "4 passed, 1 failed", done.stdout
            outcomes[processes] = _verdicts(tmp_path / f"rep{processes}")
    finally:
        engine.stop()
    assert outcomes["2"] == outcomes["1"]
    assert outcomes["1"][0] == {"flows/ok0": "PASSED", "flows/ok1": "PASSED", "flows/ok2": "PASSED",
                             "flows/wrong": "FAILED", ALONE: "PASSED"}


def test_a_loner_is_handed_out_only_to_an_idle_engine_and_blocks_later_work_on_it(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    shared = load_targets().pair("address", "reference", sidecar_address="127.0.0.1:1")
    own = load_targets().pair("reference", "reference")
    ok = load_scenario(lib / "flows" / "ok0.yaml", root=lib)
    alone = load_scenario(lib / f"{ALONE}.yaml", root=lib)
    assert needs_engine_alone(alone) and not needs_engine_alone(ok)
    engines = _Engines()
    engines.started((ok, shared))
    # The loner waits for the engine to drain, and the shared work behind it waits too; other engines go on.
    assert engines.pick([(alone, shared), (ok, shared), (ok, own)]) == 2
    assert engines.pick([(alone, shared), (ok, shared)]) is None
    engines.ended((ok, shared))
    assert engines.pick([(alone, shared), (ok, shared)]) == 0
    engines.started((alone, shared))
    assert engines.pick([(ok, shared)]) is None  # nothing beside a loner
    engines.ended((alone, shared))
    assert engines.pick([(ok, shared)]) == 0


def _children() -> list[int]:
    """This process's child processes that are run children (from /proc)."""
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return [pid for pid in pids
            if b"conformance.runner.child" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_a_child_that_dies_turns_its_scenario_into_an_error_and_the_others_still_run(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    options = RunOptions(scenarios=lib, scenario=("flows/ok*",), no_reports=True)
    prepared = prepare_run(options)
    items = Plan.build(prepared.scenarios, prepared.pairs).items
    seen: list[Event] = []
    killed: list[int] = []

    def emit(event: Event) -> None:
        seen.append(event)
        if isinstance(event, ScenarioStarted) and not killed:  # the first scenario's child dies under it
            (pid,) = _children()
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    results = run_in_processes(items, emit=emit, setup=ChildRun(options=options, processes=1, jobs=1,
                                                                work_root=tmp_path))
    assert [r.scenario for r in results] == [s.id for s, _ in items]  # one result each, none lost
    errors = [r for r in results if r.outcome is Outcome.ERROR]
    assert len(errors) == 1, [(r.scenario, r.outcome, r.message) for r in results]
    assert f"(pid {killed[0]}) was killed by signal {signal.SIGKILL.value}" in errors[0].message
    assert "Reproduce with:" in errors[0].message
    assert [r.outcome for r in results if r is not errors[0]] == [Outcome.PASSED] * (len(items) - 1)
    assert sum(isinstance(e, ScenarioFinished) for e in seen) == len(items)
    assert _children() == []  # the replacement ended with the run


def test_processes_below_one_is_bad_input(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--processes", "0", "--no-reports"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--processes 0: give 1 or more" in done.stderr


def test_the_last_runs_durations_order_the_work_and_an_unreadable_record_gives_none(tmp_path: Path) -> None:
    from conformance.events import to_json
    from conformance.runner.slots import last_durations

    def finished(sid: str, duration: float) -> str:
        return to_json(ScenarioFinished(scenario=sid, pair="reference+reference", sidecar="reference",
                                        worker="reference", outcome=Outcome.PASSED, duration_s=duration,
                                        requirements=("ACT-RESULT-001",)))

    (tmp_path / "events.jsonl").write_text(f"{finished('a/short', 0.5)}\n{finished('a/long', 8.0)}\n",
                                           encoding="utf-8")
    assert last_durations(tmp_path) == {("a/short", "reference+reference"): 0.5,
                                        ("a/long", "reference+reference"): 8.0}
    (tmp_path / "events.jsonl").write_text("not json\n", encoding="utf-8")
    assert last_durations(tmp_path) == {}
    assert last_durations(tmp_path / "missing") == {} and last_durations(None) == {}
