"""The `conformance` command: exit codes, file:line errors, listing and validation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


GOOD = """title: ok
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 1}
"""


def test_broken_scenario_files_get_file_line_and_exit_2(tmp_path):
    write(tmp_path, "a/good.yaml", GOOD)
    write(tmp_path, "a/bad.yaml", "title: bad\nrequirements: [RPL-DET-001]\nprograms: {main: {steps: [{teleport: 1}]}}\n"
                                  "start: {workflow: main}\nsteps:\n  - wait: {status: DONE}\n")
    write(tmp_path, "b/syntax.yaml", "title: [unclosed\n")
    for command in ("validate", "run", "list"):
        out = conformance(command, "--scenarios", str(tmp_path))
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
        assert f"{tmp_path / 'a' / 'bad.yaml'}:3: program:" in out.stderr
        assert f"{tmp_path / 'a' / 'bad.yaml'}:6: 'DONE' is not a status" in out.stderr
        assert f"{tmp_path / 'b' / 'syntax.yaml'}:2: not valid YAML" in out.stderr
        assert ">    6 |   - wait: {status: DONE}" in out.stderr  # the YAML excerpt


def test_run_exit_codes_and_reports(tmp_path):
    write(tmp_path, "x/good.yaml", GOOD)
    ok = conformance("run", "--scenarios", str(tmp_path), "--reports", str(tmp_path / "rep"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().splitlines()[-2] == "1 passed, 0 failed"
    for name in ("junit.xml", "summary.json", "matrix.html", "matrix.md", "events.jsonl"):
        assert (tmp_path / "rep" / name).is_file(), name
    write(tmp_path, "x/wrong.yaml", GOOD.replace("output: 1", "output: 2"))
    bad = conformance("run", "--scenarios", str(tmp_path), "--no-reports")
    assert bad.returncode == 1
    assert f"{sys.executable} -m conformance run --sidecar reference --worker reference --scenario x/wrong" in bad.stdout
    rebuilt = conformance("report", "--events", str(tmp_path / "rep" / "events.jsonl"), "--reports",
                          str(tmp_path / "rep2"))
    assert rebuilt.returncode == 0 and (tmp_path / "rep2" / "matrix.html").is_file()


def test_unknown_requirement_and_target_are_bad_input(tmp_path):
    write(tmp_path, "x/unknown.yaml", GOOD.replace("RPL-DET-001", "NOPE-001"))
    out = conformance("validate", "--scenarios", str(tmp_path))
    assert out.returncode == 2 and "requirement 'NOPE-001' is not in conformance/requirements.yaml" in out.stderr
    write(tmp_path, "x/unknown.yaml", GOOD)
    out = conformance("run", "--scenarios", str(tmp_path), "--worker", "no-such-sdk", "--no-reports")
    assert out.returncode == 2 and "unknown worker 'no-such-sdk'" in out.stderr


def test_library_is_valid_and_covers_every_requirement():
    out = conformance("validate")
    assert out.returncode == 0, out.stderr
    assert "79 of 79 requirements covered" in out.stdout or "requirements covered" in out.stdout


def test_validate_takes_folders_and_files_and_suggests_every_kind_of_typo(tmp_path):
    good = tmp_path / "lib" / "a" / "good.yaml"
    good.parent.mkdir(parents=True)
    good.write_text("title: ok\nrequirements: [RPL-DET-001]\nprograms: {main: {steps: [{return: 1}]}}\n"
                    "start: {workflow: main}\nexpect: {status: COMPLETED, output: 1}\n", encoding="utf-8")
    ok = conformance("validate", str(tmp_path / "lib"), str(good))
    assert ok.returncode == 0 and ok.stdout.startswith("2 scenario(s) valid"), ok.stdout + ok.stderr
    typo = tmp_path / "typo.yaml"
    typo.write_text("title: typo\nrequirements: [RPL-DET-01]\nprograms: {main: {steps: [{wait_evnt: go}]}}\n"
                    "start: {workflow: main}\nsteps:\n  - raize: {event: go}\nexpect: {status: COMPLETD}\n",
                    encoding="utf-8")
    bad = conformance("validate", str(typo), str(tmp_path / "missing"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    for hint in ("got raize (did you mean 'raise'?)", "'wait_evnt' (did you mean 'wait_event'?)",
                 "'COMPLETD' is not a status (did you mean 'COMPLETED'?)", "missing: no such file or folder"):
        assert hint in bad.stderr, bad.stderr


def test_version_says_where_the_library_is():
    out = conformance("--version")
    assert out.returncode == 0 and out.stdout.startswith("conformance ")
    assert f"library: {ROOT} (a checkout)" in out.stdout and f"scenarios: {ROOT / 'scenarios'}" in out.stdout


def test_selection_by_area_and_the_scenarios_that_failed_last_time(tmp_path):
    lib = tmp_path / "lib"
    write(lib, "x/good.yaml", GOOD)
    write(lib, "x/wrong.yaml", GOOD.replace("output: 1", "output: 2"))
    write(lib, "y/other.yaml", GOOD)
    reports = str(tmp_path / "rep")
    area = conformance("run", "--scenarios", str(lib), "--area", "x", "--reports", reports)
    assert area.returncode == 1 and "2 scenarios" in area.stdout.splitlines()[0], area.stdout
    again = conformance("run", "--scenarios", str(lib), "--last-failed", "--reports", reports)
    assert again.returncode == 1 and "1 scenario on" in again.stdout.splitlines()[0], again.stdout + again.stderr
    assert "x/wrong" in again.stdout and "x/good" not in again.stdout
    typo = conformance("run", "--scenarios", str(lib), "--area", "yy", "--no-reports")
    assert typo.returncode == 2 and "unknown area 'yy' (did you mean 'y'?)" in typo.stderr
    fresh = conformance("run", "--scenarios", str(lib), "--last-failed", "--reports", str(tmp_path / "none"))
    assert fresh.returncode == 2 and "no earlier run in" in fresh.stderr


def test_work_files_go_when_every_scenario_passed_and_stay_when_one_did_not(tmp_path):
    """A run's scenario folders (targets' logs, stores) are one folder of the run: removed after a clean run,
    kept and named after a failure, whose message points into it."""
    temp = tmp_path / "temp"
    temp.mkdir()
    write(tmp_path, "lib/x/good.yaml", GOOD)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "conformance", "run", "--scenarios", str(tmp_path / "lib"),
                               "--no-reports"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "TMPDIR": str(temp)})

    ok = run()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert not list(temp.glob("conformance-run-*")), "a clean run left its work folder"
    write(tmp_path, "lib/x/wrong.yaml", GOOD.replace("output: 1", "output: 2"))
    bad = run()
    assert bad.returncode == 1, bad.stdout + bad.stderr
    kept = list(temp.glob("conformance-run-*"))
    assert len(kept) == 1 and f"work files of this run (targets' logs, stores), named in the messages above: {kept[0]}" \
        in bad.stderr
    assert len(list(kept[0].glob("conformance-*"))) == 2  # both scenarios' folders
