"""Both ways into the library on one sample with every outcome: `conformance run` and `pytest -n 2` give
the same verdicts, failure text, reproduce lines, matrix, JUnit, summary.json and allure results
(tests/conformance/parity.py compares them; run it on the whole library as its docstring says)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conformance.parity import compare, run_both

ROOT = Path(__file__).resolve().parents[2]
MINE = {
    "good": "title: returns one\nrequirements: [RPL-DET-001]\n",
    "bad": "title: expects two\nrequirements: [RPL-DET-001]\n",  # a MUST broken: FAILED
    "known": "title: expects two, a declared gap\nrequirements: [RPL-EXEC-001]\n",  # --gap: KNOWN_FAILURE
    "should": "title: expects two, a SHOULD\nrequirements: [TMR-TIMEOUT-001]\n",  # a SHOULD broken: WARNING
}
BODY = "programs: {main: {steps: [{return: 1}]}}\nstart: {workflow: main}\nexpect: {status: COMPLETED, output: %d}\n"
WORKER = "{python} -m fake_worker --sidecar {address} --programs {programs}"
CAPABILITIES = ("adversary", "ledger", "ids_from_one", "task_execution_id", "teid_uuid5", "timers")
FROM_LIBRARY = (
    "vectors/timer-fire-at",  # a turn-level vector: its transcript is the turn and the answer
    "history/completions-attested-when-signing",  # needs history signing: NOT_APPLICABLE here
)


def _sample(tmp_path: Path) -> None:
    mine = tmp_path / "scenarios" / "mine"
    mine.mkdir(parents=True)
    for name, head in MINE.items():
        (mine / f"{name}.yaml").write_text(head + BODY % (1 if name == "good" else 2), encoding="utf-8")
    for scenario in FROM_LIBRARY:
        target = tmp_path / "scenarios" / f"{scenario}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / "scenarios" / f"{scenario}.yaml").read_bytes())


def test_both_paths_agree_on_every_outcome_verdict_text_and_report(tmp_path):
    _sample(tmp_path)
    # --fail-on known,should: a known failure and a warning fail the run, and their items, both ways.
    # The reference worker as a command (a declared gap needs a worker under test), with what it can do.
    pair = ["--worker", "command", "--worker-command", WORKER, *(w for c in CAPABILITIES for w in ("--capability", c)),
            "--gap", "RPL-EXEC-001@mine/known=declared on purpose", "--fail-on", "known,should", "--jobs", "4"]
    runs = run_both(work=tmp_path / "runs", selection=[], pair=pair, processes=2, cwd=tmp_path)
    assert (runs.cli_exit, runs.py_exit) == (1, 1)
    parity = compare(runs)
    assert parity.differences == (), "\n".join(parity.differences)
    assert parity.compared == len(MINE) + len(FROM_LIBRARY)
    assert parity.outcomes == {"PASSED": 2, "FAILED": 1, "KNOWN_FAILURE": 1, "WARNING": 1, "NOT_APPLICABLE": 1}
    # What a user sees in the pytest path's allure results, read directly.
    results = {r["labels"][[label["name"] for label in r["labels"]].index("story")]["value"]: r
               for r in map(json.loads, (p.read_text(encoding="utf-8") for p in runs.py_allure.glob("*-result.json")))}
    assert {k: r["status"] for k, r in results.items() if k.startswith("mine/")} == {
        "mine/good": "passed", "mine/bad": "failed", "mine/known": "failed", "mine/should": "failed"}
    assert results["history/completions-attested-when-signing"]["status"] == "skipped"
    assert results["mine/bad"]["statusDetails"]["message"].startswith("FAILED: breaks ")  # the CLI's text
    for story, result in results.items():
        assert result["fullName"] == f"{story}[reference+command]"
        assert not any(a["name"] in ("log", "stdout", "stderr") for a in result.get("attachments", [])), story
        if story != "history/completions-attested-when-signing":  # not run: no transcript
            assert {a["name"] for a in result.get("attachments", [])} >= {"protocol transcript", "timeline"}, story
    # Both reproduce lines (compared above) name the console script, as an installed user runs the CLI.
    message = results["mine/bad"]["statusDetails"]["message"]
    assert "Reproduce with: " in message and "-m conformance" not in message, message


def test_the_pytest_paths_reproduce_words_are_those_of_the_console_script_beside_its_interpreter(tmp_path):
    from conformance.reproduce import installed_run_words

    bin_dir = tmp_path / "env" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("", encoding="utf-8")
    assert installed_run_words(environ={"PATH": "/usr/bin"}, executable=str(python)) == (
        str(python), "-m", "conformance", "run")  # not installed there: the module
    script = bin_dir / "conformance"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    assert installed_run_words(environ={"PATH": "/usr/bin"}, executable=str(python)) == (str(script), "run")
    assert installed_run_words(environ={"PATH": f"{bin_dir}:/usr/bin"}, executable=str(python)) == ("conformance", "run")
