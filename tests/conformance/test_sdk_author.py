"""An SDK author's first hour, on the reference pair: a target file of their own that adds to the
built-in targets, capabilities and gaps on the command line, the init-target template, a
"Reproduce with:" line that runs again as pasted, and several runs merged into one report."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from conformance.events import Outcome, ScenarioFinished
from conformance.reporting import read_events
from conformance.targets.registry import TargetError, declare, load_targets, parse_gap

ROOT = Path(__file__).resolve().parents[2]
# The reference worker as a command (fake_worker's CLI), so a "third-party" worker runs without an SDK.
WORKER = "{python} -m fake_worker --sidecar {address} --programs {programs}"
GOOD = """title: ok
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 1}
"""
NEEDS_EVENTS = """title: needs events
requirements: [EVT-RAISE-001]
requires: [events]
programs: {main: {steps: [{wait_event: go, as: x}, {return: "${x}"}]}}
start: {workflow: main}
steps:
  - raise: {event: go, data: 7}
expect: {status: COMPLETED, output: 7}
"""


def conformance(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_targets_file_adds_to_the_built_in_targets_and_a_clash_names_both_files(tmp_path):
    mine = write(tmp_path / "my.yaml", f"workers:\n  my-sdk:\n    kind: command\n    command: '{WORKER}'\n"
                                       "    capabilities: [events]\n")
    targets = load_targets(extra=[mine])
    assert {"reference", "dapr-ext-workflow", "my-sdk"} <= set(targets.workers)
    assert "reference" in targets.sidecars and targets.workers["my-sdk"].capabilities == {"events"}

    clash = write(tmp_path / "clash.yaml", "workers:\n  dapr-ext-workflow:\n    kind: command\n")
    try:
        load_targets(extra=[clash])
    except TargetError as exc:
        assert str(clash) in str(exc) and str(ROOT / "drivers" / "dapr_ext_workflow" / "target.yaml") in str(exc)
    else:
        raise AssertionError("a clash of target names was accepted")
    twice = conformance("targets", "--targets", str(mine), "--targets", str(mine))
    assert twice.returncode == 2 and "already declared in" in twice.stderr and "Traceback" not in twice.stderr


def test_declarations_from_the_command_line():
    gap = parse_gap("TMR-TIMEOUT-001@timers/*,events/x=not yet")
    assert (gap.requirement, gap.scenarios, gap.reason) == ("TMR-TIMEOUT-001", ("timers/*", "events/x"), "not yet")
    targets = declare(load_targets(), worker_capabilities=["ids_from_one"], worker_gaps=[gap])
    assert "ids_from_one" in targets.workers["command"].capabilities
    assert targets.workers["command"].gaps == (gap,)
    assert targets.workers["reference"] == load_targets().workers["reference"]  # the reference is never changed
    for bad in ("TMR-TIMEOUT-001", "=reason", "X@y="):
        try:
            parse_gap(bad)
        except TargetError as exc:
            assert "REQUIREMENT=reason" in str(exc)
        else:
            raise AssertionError(f"--gap {bad!r} was accepted")


def test_command_worker_capabilities_gaps_and_reproduce_line(tmp_path):
    lib = tmp_path / "lib"
    write(lib / "a" / "good.yaml", GOOD)
    write(lib / "a" / "events.yaml", NEEDS_EVENTS)
    write(lib / "a" / "wrong.yaml", GOOD.replace("output: 1", "output: 2"))
    base = ("run", "--scenarios", str(lib), "--worker", "command", "--worker-command", WORKER)

    bare = conformance(*base, "--reports", str(tmp_path / "bare"))
    outcomes = _outcomes(tmp_path / "bare")
    assert bare.returncode == 1 and outcomes["a/events"] is Outcome.NOT_APPLICABLE, bare.stdout + bare.stderr
    declared = conformance(*base, "--capability", "events", "--gap", "RPL-DET-001@a/wrong=known to differ",
                           "--reports", str(tmp_path / "declared"))
    outcomes = _outcomes(tmp_path / "declared")
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert outcomes == {"a/good": Outcome.PASSED, "a/events": Outcome.PASSED, "a/wrong": Outcome.KNOWN_FAILURE}

    typo = conformance(*base, "--capability", "evnts", "--no-reports")
    assert typo.returncode == 2 and "unknown capability 'evnts'; did you mean 'events'?" in typo.stderr

    # The failure's reproduce line, pasted into a shell in another directory, runs that scenario again on the
    # same declaration, with the interpreter the run used, and writes to reproduce/ in the run's reports.
    line = next(l for l in bare.stdout.splitlines() if l.strip().startswith("Reproduce with:"))
    command = line.split("Reproduce with:", 1)[1].strip()
    argv = shlex.split(command)
    assert argv[argv.index("-m") - 1:argv.index("-m") + 3] == [sys.executable, "-m", "conformance", "run"]
    assert "--scenarios" in argv and "--worker-command" in argv
    assert argv[argv.index("--reports") + 1] == str(tmp_path / "bare" / "reproduce")
    before = (tmp_path / "bare" / "events.jsonl").read_bytes()
    again = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert again.returncode == 1 and "1 scenario" in again.stdout, again.stdout + again.stderr
    assert "a/wrong" in again.stdout and "a/good" not in again.stdout
    assert (tmp_path / "bare" / "events.jsonl").read_bytes() == before  # the run's own reports are kept
    assert (tmp_path / "bare" / "reproduce" / "events.jsonl").is_file()


def test_targets_file_worker_runs_and_reproduce_repeats_the_file(tmp_path):
    lib = write(tmp_path / "lib" / "a" / "wrong.yaml", GOOD.replace("output: 1", "output: 2")).parents[1]
    mine = write(tmp_path / "my.yaml", f"workers:\n  my-sdk:\n    kind: command\n    command: '{WORKER}'\n"
                                       "    ready_line: '^connected to '\n")
    out = conformance("run", "--scenarios", str(lib), "--targets", str(mine), "--worker", "my-sdk", "--no-reports")
    assert out.returncode == 1 and "reference+my-sdk" in out.stdout, out.stdout + out.stderr
    line = next(l for l in out.stdout.splitlines() if l.strip().startswith("Reproduce with:"))
    assert f"--targets {mine}" in line and "--worker my-sdk" in line


def test_init_target_writes_a_file_that_loads(tmp_path):
    out = conformance("init-target", "my-sdk", "--command", WORKER, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "my-sdk.target.yaml"
    doc = yaml.safe_load(path.read_text())
    assert doc["workers"]["my-sdk"]["command"] == WORKER
    assert load_targets(extra=[path]).workers["my-sdk"].capabilities == frozenset()
    again = conformance("init-target", "my-sdk", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr


def test_report_merges_several_runs(tmp_path):
    lib = tmp_path / "lib"
    write(lib / "a" / "good.yaml", GOOD)
    write(lib / "a" / "events.yaml", NEEDS_EVENTS)
    first = conformance("run", "--scenarios", str(lib), "--reports", str(tmp_path / "ref"))
    second = conformance("run", "--scenarios", str(lib), "--worker", "command", "--worker-command", WORKER,
                         "--reports", str(tmp_path / "cmd"))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    merged = conformance("report", "--events", str(tmp_path / "ref" / "events.jsonl"),
                         "--events", str(tmp_path / "cmd" / "events.jsonl"), "--reports", str(tmp_path / "all"))
    assert merged.returncode == 0, merged.stderr
    results = [e for e in read_events(tmp_path / "all" / "events.jsonl") if isinstance(e, ScenarioFinished)]
    assert sorted((r.pair, r.scenario, r.outcome) for r in results) == [
        ("reference+command", "a/events", Outcome.NOT_APPLICABLE), ("reference+command", "a/good", Outcome.PASSED),
        ("reference+reference", "a/events", Outcome.PASSED), ("reference+reference", "a/good", Outcome.PASSED)]
    summary = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert set(summary["pairs"]) >= {"reference+reference", "reference+command"}
    matrix = (tmp_path / "all" / "matrix.md").read_text()
    assert "reference+reference" in matrix and "reference+command" in matrix
    junit = (tmp_path / "all" / "junit.xml").read_text()
    assert junit.count("<testcase") == 4
    assert len(list((tmp_path / "all" / "allure-results").glob("*-result.json"))) == 4

    same = conformance("report", "--events", str(tmp_path / "ref" / "events.jsonl"),
                       "--events", str(tmp_path / "ref" / "events.jsonl"), "--reports", str(tmp_path / "dup"))
    assert same.returncode == 2 and "both have scenario a/events on reference+reference (and 1 more)" in same.stderr
    missing = conformance("report", "--events", str(tmp_path / "nope.jsonl"), "--reports", str(tmp_path / "x"))
    assert missing.returncode == 2 and "no events file at" in missing.stderr


def _outcomes(reports: Path) -> dict[str, Outcome]:
    return {e.scenario: e.outcome for e in read_events(reports / "events.jsonl") if isinstance(e, ScenarioFinished)}
