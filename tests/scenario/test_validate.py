"""`conformance validate` catches what a run would: undefined programs, duplicate and unknown keys,
garbled files; each problem is `file:line` with exit 2, never a traceback."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conformance import cli
from conformance.scenario import source
from conformance.errors import InputError
from conformance.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]

GOOD = """title: ok
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 1}
"""


def validate(folder: Path | None, *extra: str) -> tuple[int, str, str]:
    """`conformance validate [--scenarios folder]` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["validate", *(["--scenarios", str(folder)] if folder else []), *extra])
    return code, out.getvalue(), err.getvalue()


def problems(tmp_path: Path, text: str | bytes, name: str = "s.yaml") -> list[tuple[int, str]]:
    """(line, message) of every problem load_scenario finds in `text`; [] when it loads."""
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    try:
        load_scenario(path, root=tmp_path)
    except InputError as exc:
        for problem in exc.problems:
            assert problem.file == str(path)
        return [(problem.line, problem.what) for problem in exc.problems]
    return []


def test_a_users_folder_of_valid_scenarios_passes_without_catalogue_coverage(tmp_path):
    (tmp_path / "mine").mkdir()
    for name in ("one", "two"):
        (tmp_path / "mine" / f"{name}.yaml").write_text(GOOD)
    code, out, err = validate(tmp_path)
    assert (code, err) == (0, ""), err
    assert out.startswith("2 scenario(s) valid")
    code, _, err = validate(tmp_path, "--coverage")  # asked for: every requirement must be covered
    assert code == 2 and "is covered by no scenario" in err


def test_the_shipped_library_is_held_to_full_coverage(tmp_path, monkeypatch):
    code, out, err = validate(None)  # the default: the shipped library
    assert code == 0, err
    assert re.match(r"\d+ scenario\(s\) valid; \d+ of \d+ requirements covered", out), out
    # A requirement no shipped scenario covers is a problem of the library, and only of it.
    extended = tmp_path / "requirements.yaml"
    extended.write_text(cli.CATALOGUE.read_text(encoding="utf-8") + """
  - id: RPL-DET-999
    title: Nobody covers this
    text: A requirement added to the catalogue without a scenario.
    level: MUST
    area: replay
    applies_to: worker
    source: "seed 000"
""", encoding="utf-8")
    monkeypatch.setattr(cli, "CATALOGUE", extended)
    code, _, err = validate(None)
    assert code == 2 and f"{extended}: requirement RPL-DET-999 is covered by no scenario" in err, err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "one.yaml").write_text(GOOD)
    assert validate(tmp_path / "mine")[0] == 0


def test_undefined_programs_and_children_are_caught_with_did_you_mean(tmp_path):
    text = """title: typo
requirements: [RPL-DET-001]
programs:
  main:
    steps:
      - call_child: {workflow: helpr}
      - all:
          - call_child: {workflow: nowhere}
  helper: {steps: [{return: 1}]}
start: {workflow: mian}
steps:
  - start: {workflow: helper, as: other}
  - start: {workflow: gone, as: third}
"""
    found = problems(tmp_path, text)
    assert (6, "child workflow 'helpr' is not defined in programs (did you mean 'helper'?); defined: helper, main") \
        in found
    assert (8, "child workflow 'nowhere' is not defined in programs; defined: helper, main") in found
    assert (10, "start of workflow 'mian' is not defined in programs (did you mean 'main'?); defined: helper, main") \
        in found
    assert any(line == 13 and "'gone' is not defined" in m for line, m in found), found
    assert len(found) == 4, found


def test_a_deliberately_unregistered_start_and_restarted_programs_are_defined(tmp_path):
    text = """title: on purpose
requirements: [RPL-DET-001]
programs:
  main: {versions: {v1: {steps: [{return: 1}]}}}
start: {workflow: nobody_has_it, unregistered: true}
steps:
  - restart_worker:
      programs: {later: {steps: [{return: 2}]}}
  - start: {workflow: later, as: second}
  - restart_worker: {versions: {main: [v1]}}
"""
    assert problems(tmp_path, text) == []
    bad = text.replace("[v1]", "[v1x]").replace("unregistered: true", "unregistered: 1")
    found = problems(tmp_path, bad)
    assert [line for line, _ in found] == [5, 5, 10], found
    assert found[1][1].startswith("unregistered is true")
    assert found[2][1] == "workflow 'main' has no version 'v1x' (did you mean 'v1'?); versions: v1"


def test_duplicate_keys_are_an_error_at_the_second_one(tmp_path):
    text = GOOD.replace("start: {workflow: main}\n", "start: {workflow: main}\nstart: {workflow: main, input: 2}\n")
    assert problems(tmp_path, text) == [
        (5, "duplicate key 'start' (first at line 4); YAML would silently keep only the last one")]
    nested = GOOD.replace("{status: COMPLETED, output: 1}", "{status: COMPLETED, output: 1, status: FAILED}")
    assert [line for line, _ in problems(tmp_path, nested)] == [5]


def test_an_unknown_key_is_reported_on_its_own_line_with_did_you_mean(tmp_path):
    text = GOOD + "steps:\n  - wait:\n      stauts: COMPLETED\n      timeout: 5s\ncheks: []\nTIMEOUT: 5s\n"
    found = problems(tmp_path, text)
    assert any(line == 11 and m.startswith("unknown key 'TIMEOUT' in a scenario (did you mean 'timeout'?)")
               for line, m in found), found
    assert (8, "unknown key 'stauts' in step 'wait' (did you mean 'status'?); allowed: instance, status, timeout") \
        in found
    assert any(line == 10 and m.startswith("unknown key 'cheks' in a scenario (did you mean 'checks'?)")
               for line, m in found), found


def test_unknown_keys_in_programs_are_on_their_own_line_with_did_you_mean(tmp_path):
    text = GOOD.replace("programs: {main: {steps: [{return: 1}]}}\n", """programs:
  main:
    steps:
      - call_activity:
          name: echo
          retyr: {max_attempts: 2, first_delay: 1s}
      - {timre: 1s}
    stpes: []
""")
    found = problems(tmp_path, text)
    assert found == [
        (8, "program: unknown key 'retyr' (did you mean 'retry'?); allowed: name, input, retry, app, propagation"),
        (9, "program: unknown key 'timre' (did you mean 'timer'?); allowed: call_activity, call_child, timer, "
            "wait_event, spawn, all, any, if_patched, if, set, set_status, continue_as_new, return, fail, as"),
        (10, "program: unknown key 'stpes' (did you mean 'steps'?); allowed: steps, versions"),
    ]


# One file per class of garbling a run would have crashed on: (content, line, message fragment).
GARBLED = {
    "not-utf8": (GOOD.encode().replace(b"output: 1", b"output: \xff\xfe"), 5, "not UTF-8: byte 0xff"),
    "control-char": (GOOD.replace("title: ok", "title: o\x07k"), 1, "control character U+0007"),
    "nul-byte": (GOOD.encode().replace(b"programs", b"pro\x00grams"), 3, "control character U+0000"),
    "deep-sequence": (GOOD + "checks: " + "[" * 5000 + "]" * 5000 + "\n", 6, "nested deeper than 64 levels"),
    "deep-mapping": (GOOD + "sidecar: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", 6, "nested deeper than"),
    "huge-int": (GOOD.replace("output: 1", "output: " + "9" * 5000), 5, "integer of 5000 characters is too large"),
    "huge-event-id": (
        "kind: vector\nrequirements: [RPL-DET-001]\nprograms: {main: {steps: [{return: 1}]}}\nvector:\n"
        "  new: [{WorkflowStarted: {}, eventId: 99999999999999999999}, {ExecutionStarted: {name: main}}]\n"
        "  actions: []\n", 5, "eventId 99999999999999999999 must be a whole number"),
    "infinite-timeout": (GOOD + "timeout: .inf\n", 6, "duration inf is not a finite number of seconds"),
    "bad-date": (GOOD.replace("output: 1", "output: 2026-13-45"), 5, "month must be in 1..12"),
    "binary-junk": (bytes(range(256)) * 4, 2, "not UTF-8: byte 0x80"),  # line 2: after the 0x0a
    "alias-bomb": (
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)),
        1, f"expands to more than {source.MAX_VALUES} values"),
    "self-alias": ("a: &a [*a]\n", 1, "an alias that contains itself"),
    "non-string-key": (GOOD.replace("title: ok", "1: ok"), 1, "mapping key '1' is not a string"),
    "python-tag": (GOOD.replace("title: ok", "title: !!python/object/apply:os.system [ls]"), 1,
                   "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not supported"),
    "python-scalar-tag": (GOOD.replace("title: ok", "title: !!python/name:os.system ok"), 1,
                          "could not determine a constructor"),
    "two-documents": (GOOD + "---\n" + GOOD, 6, "expected a single document"),
    "oversized": ("title: " + "x" * (source.MAX_BYTES + 1) + "\n", 1, "a scenario file is at most"),
}


@pytest.mark.parametrize("name", sorted(GARBLED))
def test_each_garbled_file_is_a_file_line_scenario_error(tmp_path, name):
    content, line, fragment = GARBLED[name]
    found = problems(tmp_path, content)
    assert found, "loaded a garbled file"
    assert any(ln == line and fragment in m for ln, m in found), found
    assert not any("internal error" in m for _, m in found), found


def test_validate_on_garbled_files_exits_2_with_file_line_and_no_traceback(tmp_path):
    for name, (content, _, _) in GARBLED.items():
        (tmp_path / f"{name}.yaml").write_bytes(content.encode() if isinstance(content, str) else content)
    out = subprocess.run([sys.executable, "-m", "conformance", "validate", "--scenarios", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    for name, (_, line, fragment) in GARBLED.items():
        assert re.search(rf"^{re.escape(str(tmp_path / name))}\.yaml:{line}: .*{re.escape(fragment)}", out.stderr,
                         re.M), name


APPS = """title: apps
requirements: [ROUTE-TARGET-001]
apps:
  caller: {programs: [main]}
  callee:
    programs: []
%s
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
expect: {status: COMPLETED, output: 1}
"""


def test_an_apps_namespace_limit_and_policy_scopes_load_onto_the_app(tmp_path):
    body = ("    namespace: other\n    max_body_size: 2000\n"
            "    access_policy: {scopes: [callee], rules: [{callers: [x], activities: ['*']}]}")
    path = tmp_path / "s.yaml"
    path.write_text(APPS % body, encoding="utf-8")
    callee = load_scenario(path, root=tmp_path).apps[1]
    assert (callee.namespace, callee.max_body_size, callee.policy_scopes) == ("other", 2000, ("callee",))
    assert callee.access_policy is not None and callee.access_policy[0].callers == ("x",)


@pytest.mark.parametrize("body, message", [
    ("    namespace: Other_NS", "namespace 'Other_NS'"),
    ("    max_body_size: 0", "max_body_size is a number of bytes of at least 1"),
    ("    access_policy: {scopes: callee, rules: []}", "scopes is a list of app ids"),
    ("    access_policy: {scope: [callee], rules: []}", "scope"),
])
def test_a_bad_app_namespace_limit_or_scopes_is_a_line_of_its_own(tmp_path, body, message):
    got = problems(tmp_path, APPS % body)
    assert got and any(message in text and line >= 6 for line, text in got), got


def test_event_kinds_in_history_expectations_get_did_you_mean(tmp_path):
    text = GOOD.replace("expect: {status: COMPLETED, output: 1}\n", """expect:
  status: COMPLETED
  history:
    contains_in_order: [ExecutionStarted, {TaskCompleted: {}}, {TimerFird: {}}]
    exactly: ["*", ExecutionCompletd]
    not_contains: [ExecutionStaled]
    count: {TimerCreatd: 1, TaskScheduled: 0}
""")
    found = problems(tmp_path, text)
    assert [(line, m.split(";")[0]) for line, m in found] == [
        (8, "'TimerFird' is not an event kind (did you mean 'TimerFired'?)"),
        (9, "'ExecutionCompletd' is not an event kind (did you mean 'ExecutionCompleted'?)"),
        (10, "'ExecutionStaled' is not an event kind (did you mean 'ExecutionStalled'?)"),
        (11, "'TimerCreatd' is not an event kind (did you mean 'TimerCreated'?)"),
    ], found
    assert problems(tmp_path, text.replace("Fird", "Fired").replace("Completd", "Completed")
                    .replace("Staled", "Stalled").replace("Creatd", "Created")) == []
