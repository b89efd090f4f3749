"""The scenario library as pytest items: the same verdicts, failure text, "Reproduce with:" lines and
reports as `conformance run`, allure results through allure-pytest, and pytest-xdist's grouping."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conformance.events import Outcome, ScenarioFinished
from conformance.reporting import read_events
from conformance.run_options import RUN_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
GOOD = """title: returns one
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 1}
"""
# The reference pair returns 1; the expectation says 2: a MUST of the scenario broken, on purpose.
BAD = """title: expects two
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 2}
"""


def _library(tmp_path: Path) -> Path:
    folder = tmp_path / "scenarios" / "mine"
    folder.mkdir(parents=True)
    (folder / "good.yaml").write_text(GOOD, encoding="utf-8")
    (folder / "bad.yaml").write_text(BAD, encoding="utf-8")
    return tmp_path / "scenarios"


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a nested pytest run: without the PYTEST_* variables of the pytest (or xdist
    worker, PYTEST_XDIST_WORKER) running this test, which would make the inner run look like a worker."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, **extra}


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env=env or _clean_env())


def _same_run(text: str) -> str:
    """The text without what differs between two runs of one scenario: its generated instance ids."""
    return re.sub(r"-[0-9a-f]{6}\b", "-<id>", text)


def _finished(path: Path) -> dict[str, ScenarioFinished]:
    return {e.scenario: e for e in read_events(path) if isinstance(e, ScenarioFinished)}


def test_both_paths_give_the_same_verdicts_text_reproduce_lines_and_reports(tmp_path):
    scenarios = _library(tmp_path)
    reports = tmp_path / "reports"  # one folder for both, as a user switching paths has: the same reproduce lines
    # Relative paths, as a user types them: the failure text names the file as given (`[scenarios/mine/bad.yaml:5]`).
    # The CLI as an installed user runs it (its console script): the pytest path's reproduce lines name it too.
    cli = subprocess.run([str(Path(sys.executable).with_name("conformance")), "run", "--scenarios", "scenarios",
                          "--reports", str(reports), "--jobs", "2"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=_clean_env())
    assert cli.returncode == 1, cli.stdout + cli.stderr
    by_cli = _finished(reports / "events.jsonl")
    cli_files = {name: (reports / name).is_file() for name in ("junit.xml", "summary.json", "matrix.md", "matrix.html")}
    for name in cli_files:
        (reports / name).unlink()
    py = _run("-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-q", "-n", "2",
              "--conformance-reports", str(reports), "--alluredir", str(tmp_path / "allure"), cwd=tmp_path)
    assert py.returncode == 1, py.stdout + py.stderr
    by_py = _finished(reports / "events.jsonl")
    assert set(by_cli) == set(by_py) == {"mine/good", "mine/bad"}  # merged from both xdist workers
    for name in by_cli:
        a, b = by_cli[name], by_py[name]
        assert (a.outcome, a.verdicts, a.broken, a.reproduce) == (b.outcome, b.verdicts, b.broken, b.reproduce)
        assert _same_run(a.message) == _same_run(b.message)
    assert by_py["mine/bad"].outcome is Outcome.FAILED and by_py["mine/good"].outcome is Outcome.PASSED
    assert "[scenarios/mine/bad.yaml:5]" in by_py["mine/bad"].message, by_py["mine/bad"].message
    assert f"--scenarios {scenarios.resolve()}" in by_py["mine/bad"].reproduce
    # The failure text pytest prints is the one the CLI prints, "Reproduce with:" line included.
    assert by_py["mine/bad"].reproduce.split(" --reports ")[0] in py.stdout and "Reproduce with:" in py.stdout
    assert all(cli_files.values()), cli_files
    for name in cli_files:
        assert (reports / name).is_file(), name
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    assert json.dumps(summary).count("mine/bad") >= 1


def test_pytest_path_allure_results_carry_the_cli_labels_and_attachments(tmp_path):
    scenarios = _library(tmp_path)
    out = tmp_path / "allure"
    py = _run("-m", "pytest", str(scenarios / "mine" / "bad.yaml"), "-p", "no:cacheprovider", "-q",
              "--alluredir", str(out), cwd=tmp_path)
    assert py.returncode == 1, py.stdout + py.stderr
    [path] = list(out.glob("*-result.json"))
    result = json.loads(path.read_text(encoding="utf-8"))
    labels: dict[str, list[str]] = {}
    for label in result["labels"]:
        labels.setdefault(label["name"], []).append(label["value"])
    assert labels["parentSuite"] == ["reference+reference"] and labels["subSuite"] == ["mine"]
    assert labels["story"] == ["mine/bad"] and "RPL-DET-001" in labels["tag"]
    assert labels["severity"] == ["critical"] and labels["suite"] == labels["feature"]
    assert result["status"] == "failed" and result["name"] == "expects two"
    assert "Reproduce with:" in result["statusDetails"]["message"]
    assert 0 < result["start"] < result["stop"]
    kinds = {a["name"]: a for a in result["attachments"]}
    assert {"protocol transcript", "protocol transcript (JSON)", "timeline"} <= set(kinds)
    transcript = json.loads((out / kinds["protocol transcript (JSON)"]["source"]).read_text(encoding="utf-8"))
    assert any(e["rpc"] == "GetWorkItems" for e in transcript)
    assert (out / kinds["timeline"]["source"]).read_text(encoding="utf-8").lstrip().startswith("<svg")
    assert (out / "categories.json").is_file() and "pairs = reference+reference" in (
        out / "environment.properties").read_text(encoding="utf-8")


def test_every_run_option_has_its_pytest_option():
    from conformance.cli import _parser

    run = _parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    cli_flags = {s for a in run._actions for s in a.option_strings if s.startswith("--")} - {"--help", "--verbose"}
    help_text = _run("-m", "pytest", "--help", "-p", "no:cacheprovider", cwd=ROOT).stdout
    for flag in sorted(cli_flags):
        spec = next(s for s in RUN_OPTIONS if f"--{s.name}" == flag)
        if spec.cli_only:
            continue  # pytest takes the scenario paths as its own arguments
        assert f"--conformance-{spec.name}" in help_text, flag


class _Items:
    def __init__(self) -> None:
        self.items: list = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = list(session.items)


def test_scenarios_that_need_a_shared_engine_alone_are_one_xdist_group(tmp_path):
    scenarios = ROOT / "scenarios" / "connection"
    seen = _Items()
    code = pytest.main([str(scenarios), "--collect-only", "-q", "-p", "no:cacheprovider",
                        "--conformance-sidecar", "address", "--conformance-sidecar-address", "127.0.0.1:9"],
                       plugins=[seen])
    assert code == 0
    from conformance.runner.isolation import needs_engine_alone

    alone = [i for i in seen.items if needs_engine_alone(i.scenario)]
    together = [i for i in seen.items if not needs_engine_alone(i.scenario)]
    assert alone, "the connection folder has scenarios that cut the worker's stream"
    for item in alone:
        groups = [m.args[0] for m in item.iter_markers("xdist_group")]
        assert groups == ["engine-alone-address"], item.nodeid
    for item in together:
        assert not list(item.iter_markers("xdist_group")), item.nodeid


def test_an_engine_held_alone_waits_for_the_scenarios_running_on_it():
    from conformance.runner.isolation import process_engine_turn
    from conformance.targets.registry import load_targets

    pair = load_targets().pair("address", "reference", sidecar_address="127.0.0.1:9")
    released, alone_in = threading.Event(), threading.Event()
    shared = process_engine_turn(pair, alone=False, address="test-lock")
    shared.__enter__()

    def loner() -> None:
        with process_engine_turn(pair, alone=True, address="test-lock"):
            alone_in.set()
            released.wait(30)

    t = threading.Thread(target=loner, daemon=True)
    t.start()
    assert not alone_in.wait(0.5)  # the shared turn is still held
    shared.__exit__(None, None, None)
    assert alone_in.wait(30)
    released.set()
    t.join(30)


def test_selection_options_choose_the_same_scenarios_and_mistakes_stop_the_session(tmp_path):
    scenarios = _library(tmp_path)
    chosen = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "--collect-only", "-q",
                  "--conformance-scenario", "mine/g*", cwd=tmp_path)
    assert chosen.returncode == 0 and "good.yaml" in chosen.stdout and "bad.yaml" not in chosen.stdout
    typo = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "-q", "--conformance-area", "evnts",
                cwd=tmp_path)
    assert typo.returncode == 4, typo.stdout + typo.stderr  # pytest's usage error, before any item
    assert "unknown area 'evnts' (did you mean 'events'?)" in typo.stderr and "Traceback" not in typo.stderr
    unknown = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "-q", "--conformance-worker", "nosuch",
                   cwd=tmp_path)
    assert unknown.returncode == 4 and "nosuch" in unknown.stderr and "Traceback" not in unknown.stderr


SLOW = """title: waits {n}
requirements: [TMR-FIRE-001]
programs: {{main: {{steps: [{{timer: 1s}}, {{return: {n}}}]}}}}
start: {{workflow: main}}
expect: {{status: COMPLETED, output: {n}}}
"""


def test_a_plain_pytest_run_keeps_jobs_scenarios_in_flight_and_reports_in_pytest_order(tmp_path):
    folder = tmp_path / "scenarios" / "slow"
    folder.mkdir(parents=True)
    for n in range(3):
        (folder / f"wait-{n}.yaml").write_text(SLOW.format(n=n), encoding="utf-8")
    reports = tmp_path / "reports"
    done = _run("-m", "pytest", str(tmp_path / "scenarios"), "-p", "no:cacheprovider", "-q", "--conformance-jobs", "3",
                "--conformance-reports", str(reports), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    finished = _finished(reports / "events.jsonl")
    assert sorted(finished) == ["slow/wait-0", "slow/wait-1", "slow/wait-2"]
    # Each waits a one-second timer; run ahead together, their runs overlap (serially they could not).
    starts = [f.started_at for f in finished.values()]
    ends = [f.started_at + f.duration_s for f in finished.values()]
    assert max(starts) < min(ends), (starts, ends)


def test_stopping_early_leaves_no_scenario_running_and_reports_what_pytest_reached(tmp_path):
    scenarios = _library(tmp_path)  # bad.yaml sorts first
    reports = tmp_path / "reports"
    done = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "-q", "-x", "--conformance-jobs", "2",
                "--conformance-reports", str(reports), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "passed" not in done.stdout, done.stdout
    assert sorted(_finished(reports / "events.jsonl")) == ["mine/bad"]


ALONE = """title: restarts its worker {n}
requirements: [CONN-REDELIVER-001]
programs: {{main: {{steps: [{{wait_event: go}}, {{return: {n}}}]}}}}
start: {{workflow: main}}
steps:
  - restart_worker: {{}}
  - raise: {{event: go}}
expect: {{status: COMPLETED, output: {n}}}
"""
# Loaded with -p into the inner run's controller and workers: each worker writes the reports it made, under
# the name xdist gave it (its workerinput; not an environment variable, which an outer run may have set).
RECORDER = """import os

WORKER = []


def pytest_configure(config):
    WORKER[:] = [getattr(config, "workerinput", {}).get("workerid")]


def pytest_runtest_logreport(report):
    worker = WORKER[0] if WORKER else None
    if worker and report.when == "call":
        with open(os.environ["CONFORMANCE_RECORD"], "a", encoding="utf-8") as out:
            out.write(f"{report.nodeid}\\t{worker}\\t{report.outcome}\\n")
"""


def test_xdist_shares_keep_the_engine_alone_group_on_one_worker_and_run_each_item_once(tmp_path):
    from conformance.targets.reference import start_reference_sidecar

    folder = tmp_path / "scenarios" / "mixed"
    folder.mkdir(parents=True)
    for n in range(6):
        (folder / f"plain-{n}.yaml").write_text(GOOD.replace("title: returns one", f"title: returns one {n}"),
                                                encoding="utf-8")
    for n in range(3):
        (folder / f"alone-{n}.yaml").write_text(ALONE.format(n=n), encoding="utf-8")
    (tmp_path / "record_workers.py").write_text(RECORDER, encoding="utf-8")
    record = tmp_path / "record.tsv"
    env = _clean_env(CONFORMANCE_RECORD=str(record),
                     PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    engine = start_reference_sidecar(options={}, work_dir=tmp_path)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", str(tmp_path / "scenarios"), "-p", "no:cacheprovider", "-p",
             "record_workers", "-q", "-n", "3", "--conformance-jobs", "6", "--conformance-sidecar", "address",
             "--conformance-sidecar-address", engine.address],
            capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    finally:
        engine.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("\t") for line in record.read_text(encoding="utf-8").splitlines()]
    by_name = {}
    for nodeid, worker, outcome in rows:
        by_name.setdefault(Path(nodeid.split("::")[0]).stem, []).append((worker, outcome))
    # Every item reported once, by one worker, and passed.
    assert sorted(by_name) == sorted([f"plain-{n}" for n in range(6)] + [f"alone-{n}" for n in range(3)])
    assert all(len(runs) == 1 and runs[0][1] == "passed" for runs in by_name.values()), by_name
    alone_workers = {by_name[f"alone-{n}"][0][0] for n in range(3)}
    plain_workers = {by_name[f"plain-{n}"][0][0] for n in range(6)}
    assert len(alone_workers) == 1, by_name  # the engine-alone group stays together
    assert len(plain_workers) > 1, by_name  # and the other items are shared out


def test_shares_cover_every_item_once_and_keep_groups_whole():
    from conformance.pytest_shares import group_of, shares

    groups = ["engine-alone-address" if n % 4 == 1 else None for n in range(13)]
    for workers in (1, 2, 3, 5):
        parts = shares(groups, workers=workers)
        assert len(parts) == workers
        assert sorted(i for part in parts for i in part) == list(range(len(groups)))
        assert len([k for k, part in enumerate(parts) if any(groups[i] for i in part)]) == 1, parts
        assert all(part == sorted(part) for part in parts)
    # Plain items are dealt out: with no group, shares differ in size by at most one.
    sizes = [len(p) for p in shares([None] * 13, workers=3)]
    assert max(sizes) - min(sizes) <= 1, sizes
    assert group_of("s/a.yaml::p@engine-alone-x") == "engine-alone-x" and group_of("s/a.yaml::p[a@b]") is None


# Loaded with -p: worker gw1 collects one item fewer than gw0.
DIFFER = """def pytest_collection_modifyitems(config, items):
    if getattr(config, "workerinput", {}).get("workerid") == "gw1":
        del items[-1]
"""


def test_workers_that_collect_different_items_end_the_run_with_the_difference(tmp_path):
    scenarios = _library(tmp_path)
    (tmp_path / "differ.py").write_text(DIFFER, encoding="utf-8")
    env = _clean_env(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # Our scheduler used to wait for a schedule that never came: the timeout is the failure here.
    done = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "-p", "differ", "-q", "-n", "2",
                cwd=tmp_path, env=env)
    assert done.returncode != 0, done.stdout + done.stderr
    assert re.search(r"Different tests were collected between gw[01] and gw[01]", done.stdout), done.stdout
    assert " passed" not in done.stdout, done.stdout  # no item ran


def test_a_run_that_also_collects_other_tests_keeps_xdists_own_scheduling(tmp_path):
    """The project's own `./dev test` runs `pytest -n 2` over testpaths that include scenarios/: the
    plugin must leave that run's scheduling (and -n auto's count) to xdist."""
    scenarios = _library(tmp_path)
    (scenarios / "mine" / "bad.yaml").unlink()
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_plain.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
                                         encoding="utf-8")
    mixed = _run("-m", "pytest", "tests", "scenarios", "-p", "no:cacheprovider", "-v", "-n", "2", cwd=tmp_path)
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
    assert "scheduling tests via LoadScheduling" in mixed.stdout, mixed.stdout
    assert "3 passed" in mixed.stdout, mixed.stdout
    only = _run("-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-v", "-n", "2", cwd=tmp_path)
    assert only.returncode == 0, only.stdout + only.stderr
    assert "scheduling tests via ShareScheduling" in only.stdout, only.stdout
    # -n auto on scenarios only: the CLI's default of one process, so xdist starts no worker.
    auto = _run("-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-v", "-n", "auto", cwd=tmp_path)
    assert auto.returncode == 0, auto.stdout + auto.stderr
    assert "1 passed" in auto.stdout and "created:" not in auto.stdout and "[gw" not in auto.stdout, auto.stdout
    # ... and says so once, at the top, before the items.
    note = "-n auto: running in this process: no xdist worker"
    assert auto.stdout.count(note) == 1 and auto.stdout.index(note) < auto.stdout.index("collected"), auto.stdout
    assert note not in only.stdout and note not in mixed.stdout


ATTACHED = {"protocol transcript", "protocol transcript (JSON)", "timeline"}


def _attachments_by_story(out: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in out.glob("*-result.json"):
        result = json.loads(path.read_text(encoding="utf-8"))
        [story] = [label["value"] for label in result["labels"] if label["name"] == "story"]
        for a in result.get("attachments", []):
            assert (out / a["source"]).is_file(), (story, a)
        found[story] = {a["name"] for a in result.get("attachments", [])}
    return found


def test_every_scenario_result_of_a_run_carries_its_attachments_both_ways(tmp_path):
    """A vector scenario (one hand-made turn, no proxy) used to have no transcript, so its allure result
    had none of the three attachments, in either path (3 of the 25 timers items of the tox recipe)."""
    scenarios = _library(tmp_path)
    vectors = scenarios / "vectors"
    vectors.mkdir()
    (vectors / "timer-fire-at.yaml").write_bytes((ROOT / "scenarios/vectors/timer-fire-at.yaml").read_bytes())
    names = {"mine/good", "mine/bad", "vectors/timer-fire-at"}
    py_out = tmp_path / "allure-py"
    py = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "-q", "-n", "2", "--alluredir", str(py_out),
              cwd=tmp_path)
    assert py.returncode == 1 and "1 failed, 2 passed" in py.stdout, py.stdout + py.stderr
    reports = tmp_path / "reports"
    cli = _run("-m", "conformance", "run", "--scenarios", str(scenarios), "--reports", str(reports), cwd=tmp_path)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    for found in (_attachments_by_story(py_out), _attachments_by_story(reports / "allure-results")):
        assert set(found) == names, found
        assert all(ATTACHED <= kinds for kinds in found.values()), found
    vector = _finished(reports / "events.jsonl")["vectors/timer-fire-at"]
    assert [(e.direction.value, e.rpc) for e in vector.transcript] == [
        ("item", "GetWorkItems"), ("request", "CompleteOrchestratorTask")]
    assert "CreateTimer#2" in vector.transcript[1].summary


def _reported(stdout: str) -> dict[str, str]:
    """scenario id -> outcome of each item pytest -v reported (under xdist: `[gwN] [ 50%] PASSED path::pair`)."""
    found = re.findall(r"\b(PASSED|FAILED|SKIPPED|ERROR) scenarios/(\S+)\.yaml::", stdout)
    return {name: outcome for outcome, name in found}


def test_x_under_xdist_stops_at_the_first_failure_and_every_report_holds_what_ran(tmp_path):
    scenarios = _library(tmp_path)
    (scenarios / "mine" / "good.yaml").unlink()
    slow = scenarios / "slow"
    slow.mkdir()
    for n in range(6):
        (slow / f"wait-{n}.yaml").write_text(SLOW.format(n=n), encoding="utf-8")
    reports, allure = tmp_path / "reports", tmp_path / "allure"
    # Shares: gw0 gets mine/bad (first), wait-1, wait-3, wait-5; gw1 wait-0, wait-2, wait-4.
    done = _run("-m", "pytest", str(scenarios), "-p", "no:cacheprovider", "-v", "-x", "-n", "2",
                "--conformance-jobs", "2", "--conformance-reports", str(reports), "--alluredir", str(allure),
                cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stopping after 1 failures" in done.stdout, done.stdout
    reported = _reported(done.stdout)
    assert reported["mine/bad"] == "FAILED" and "slow/wait-5" not in reported, reported
    assert len(reported) < 7, reported
    # What ran and only that, in every report: items run ahead and never reached are dropped.
    finished = _finished(reports / "events.jsonl")
    assert {k: v.outcome.value for k, v in finished.items()} == reported
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["total"] == len(reported) and summary["counts"]["FAILED"] == 1, summary["counts"]
    junit = (reports / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("<testcase ") == len(reported), junit
    assert all(f"slow/wait-{n}" in junit for n in range(6) if f"slow/wait-{n}" in reported)
    assert "mine/bad" in (reports / "matrix.md").read_text(encoding="utf-8")
    by_story = _attachments_by_story(allure)
    assert set(by_story) == set(reported) and all(ATTACHED <= kinds for kinds in by_story.values()), by_story


def test_last_failed_under_xdist_reruns_the_failed_scenario_only(tmp_path):
    scenarios = _library(tmp_path)  # mine/bad fails (its expectation says 2), mine/good passes
    first = _run("-m", "pytest", str(scenarios), "-v", "-n", "2", cwd=tmp_path)
    assert first.returncode == 1 and _reported(first.stdout) == {"mine/bad": "FAILED", "mine/good": "PASSED"}, (
        first.stdout + first.stderr)
    reports = tmp_path / "reports"
    again = _run("-m", "pytest", str(scenarios), "-v", "-n", "2", "--lf", "--conformance-reports", str(reports),
                 cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert _reported(again.stdout) == {"mine/bad": "FAILED"}, again.stdout
    assert sorted(_finished(reports / "events.jsonl")) == ["mine/bad"]
    # Fixed, it passes on the rerun; then --lf has nothing left that failed and runs everything.
    (scenarios / "mine" / "bad.yaml").write_text(BAD.replace("output: 2", "output: 1"), encoding="utf-8")
    fixed = _run("-m", "pytest", str(scenarios), "-v", "-n", "2", "--lf", cwd=tmp_path)
    assert fixed.returncode == 0 and _reported(fixed.stdout) == {"mine/bad": "PASSED"}, fixed.stdout + fixed.stderr


LONG = """title: waits long {n}
requirements: [TMR-FIRE-001]
programs: {{main: {{steps: [{{timer: 120s}}, {{return: {n}}}]}}}}
start: {{workflow: main}}
expect: {{status: COMPLETED, output: {n}}}
"""


def _descendants(pid: int) -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process under `pid` (from /proc, Linux)."""
    parent: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent[int(entry)] = (int(stat.rsplit(")", 1)[1].split()[1]), command)
    found, todo = {}, [pid]
    while todo:
        at = todo.pop()
        for child, (ppid, command) in parent.items():
            if ppid == at and child not in found:
                found[child] = (ppid, command)
                todo.append(child)
    return found


def _alive(pid: int, command: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        same = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() == command
    except OSError:
        return False
    return same and stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_ctrl_c_under_xdist_ends_every_worker_and_target_process_and_exits_2(tmp_path):
    import signal
    import time

    folder = tmp_path / "scenarios" / "long"
    folder.mkdir(parents=True)
    for n in range(4):
        (folder / f"wait-{n}.yaml").write_text(LONG.format(n=n), encoding="utf-8")
    # A worker process per scenario (the reference worker as a command), so there are target processes to end.
    worker = f"{sys.executable} -m fake_worker --sidecar {{address}} --programs {{programs}}"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(tmp_path / "scenarios"), "-p", "no:cacheprovider", "-q", "-n", "2",
         "--conformance-worker", "command", "--conformance-worker-command", worker],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=_clean_env())
    seen: dict[int, tuple[int, str]] = {}
    try:
        deadline = time.monotonic() + 300
        # Until both xdist workers run scenarios: target workers under two different xdist workers.
        while len({ppid for ppid, command in seen.values() if "-m fake_worker" in command}) < 2:
            assert run.poll() is None and time.monotonic() < deadline, (seen, run.stdout.read() if run.poll() else "")
            seen.update(_descendants(run.pid))
            time.sleep(0.1)
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 2, out
    assert "KeyboardInterrupt" in out and "Traceback" not in out, out
    deadline = time.monotonic() + 30  # reparented orphans would live on; the ended ones are reaped by now
    while (left := {p: c for p, (_, c) in seen.items() if _alive(p, c)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, left  # the xdist workers and every target worker they started
    assert len([p for p, (ppid, _) in seen.items() if ppid == run.pid]) >= 2, seen


def test_a_relative_subfolder_collects_and_a_clean_run_leaves_no_work_folder(tmp_path):
    """`pytest scenarios/mine` (relative, below the scenarios root) names the files as the user did; once
    every scenario passed, the process's folder of scenario work folders is gone (kept after a failure)."""
    _library(tmp_path)
    (tmp_path / "scenarios" / "mine" / "bad.yaml").unlink()
    temp = tmp_path / "temp"
    temp.mkdir()
    done = _run("-m", "pytest", "scenarios/mine", "-q", "-p", "no:cacheprovider", cwd=tmp_path,
                env=_clean_env(TMPDIR=str(temp)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert not list(temp.glob("conformance-run-*"))
    (tmp_path / "scenarios" / "mine" / "bad.yaml").write_text(BAD, encoding="utf-8")
    failed = _run("-m", "pytest", "scenarios/mine", "-q", "-p", "no:cacheprovider", cwd=tmp_path,
                  env=_clean_env(TMPDIR=str(temp)))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "[scenarios/mine/bad.yaml:" in failed.stdout  # the file as given, relative
    kept = list(temp.glob("conformance-run-*"))
    assert len(kept) == 1 and len(list(kept[0].glob("conformance-*"))) == 2
