"""A passing `conformance run` prints progress and the summary only: the engine's, worker's and
adversary's log lines go to each scenario's log file under the reports folder (and with -v to stderr)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Scenarios whose engine and worker log warnings: stalls, an adversary that disconnects and crashes.
NOISY = ("stall/stall-recorded-once", "stall/operations-refused-while-stalled",
         "activities/redelivered-after-disconnect", "activities/crash-after-run-at-least-once")
PAIR = "reference+reference"
# What the terminal may show: the header, progress rows, the end of the run, the report paths.
ALLOWED = re.compile(r"conformance run \w+: 4 scenarios on reference\+reference|"
                     r"\.{4}  4/4  0 failed  \d+:\d\d elapsed|"
                     r"run \w+ finished in [\d.]+s|4 passed, 0 failed|reports: .*|")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    selection = [arg for sid in NOISY for arg in ("--scenario", sid)]
    return subprocess.run([sys.executable, "-m", "conformance", "run", *selection, "--jobs", "2", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_passing_run_shows_no_log_line_and_files_them_per_scenario(tmp_path):
    out = run("--reports", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == ""
    assert "Traceback" not in out.stdout
    unexpected = [line for line in out.stdout.splitlines() if not ALLOWED.fullmatch(line)]
    assert not unexpected, out.stdout
    # The lines were logged, into the scenario they belong to.
    stalls = (tmp_path / "logs" / PAIR / "stall" / "stall-recorded-once.log").read_text(encoding="utf-8")
    assert re.search(r"WARNING fake_sidecar\.engine \[.*\] workflow main-stall-recorded-once-\w+ is STALLED", stalls)
    assert "adversary" not in stalls
    adversary = (tmp_path / "logs" / PAIR / "activities" / "redelivered-after-disconnect.log").read_text(
        encoding="utf-8")
    assert "adversary: disconnecting right after a dispatch" in adversary and "STALLED" not in adversary


def test_verbose_shows_the_log_lines_with_their_scenario():
    out = run("-v", "--no-reports")
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"^\[stall/stall-recorded-once on reference\+reference\] .* is STALLED", out.stderr, re.M), \
        out.stderr
    assert re.search(r"^\[\d/4\] PASSED +reference\+reference  stall/stall-recorded-once", out.stdout, re.M)
