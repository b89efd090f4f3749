"""`conformance fuzz` (conformance/fuzz/cli.py): budgets, targets, the final report, exit codes."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

import pytest

from conformance.fuzz.cli import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK, add_parser, main


@pytest.fixture(autouse=True)
def quiet_engine():
    yield
    logging.getLogger("fake_sidecar").setLevel(logging.NOTSET)
    logging.getLogger("fake_worker").setLevel(logging.NOTSET)


def test_parser_hooks_into_a_subparsers_object():
    parser = argparse.ArgumentParser(prog="conformance")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["fuzz", "--worker", "dapr-ext-workflow", "--budget", "10m", "--seed", "3",
                              "--database", "/tmp/db"])
    assert (args.command, args.worker, args.budget, args.seed, args.database) == (
        "fuzz", ["dapr-ext-workflow"], "10m", 3, Path("/tmp/db"))


def test_reference_worker_campaign_reports_no_finding(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    rc = main(["--worker", "reference", "--budget", "150", "--seed", "1", "--database", str(tmp_path / "db"),
               "--out", str(tmp_path / "scenarios" / "regressions")])
    out = capsys.readouterr().out
    assert rc == EXIT_OK, out
    assert "[fuzz reference]" in out and re.search(r"worker reference: \d+ examples", out) and "No finding." in out
    assert (tmp_path / "db").is_dir()
    assert not (tmp_path / "scenarios" / "regressions").exists()


def test_engine_campaign_reports_its_findings_with_steps(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    rc = main(["--sidecar", "reference", "--budget", "400", "--seed", "1", "--database", str(tmp_path / "db"), "-q"])
    out = capsys.readouterr().out
    assert re.search(r"sidecar reference \(engine core\): \d+ examples", out), out
    if rc == EXIT_FINDINGS:  # the reference engine's known bugs (tests/fuzz/test_finds_mutants.py)
        assert "steps: " in out and "saved: " in out
        assert list((tmp_path / "db" / "findings").glob("engine-reference-*.txt"))
    else:
        assert rc == EXIT_OK and "No finding." in out


@pytest.mark.parametrize("argv", [["--budget", "soon"], ["--worker", "no-such-worker", "--budget", "1"],
                                  ["--sidecar", "no-such-sidecar", "--budget", "1"]])
def test_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str]):
    assert main(argv) == EXIT_BAD_INPUT
    assert "conformance fuzz:" in capsys.readouterr().err
