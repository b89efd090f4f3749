"""The campaign's pure parts: which scenarios reach a mutant, the score, the equivalents file, the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.mutation import equivalents
from conformance.mutation.campaign import MutantOutcome, reaching, score
from conformance.mutation.linemap import Baseline, statement_lines
from conformance.mutation.mutants import Mutant, sample

SOURCE = """\
def f(a,
      b):
    if (a ==
            b):
        return 1
    return 2
"""


def _mutant(line: int, end: int | None = None) -> Mutant:
    return Mutant(relpath="pkg/task.py", operator="core/AddNot", occurrence=0, line=line, end_line=end or line)


def test_a_continuation_line_belongs_to_its_statement():
    lines = statement_lines(SOURCE)
    assert lines[4] == 3  # the `if` header's second line is recorded by coverage as line 3
    assert lines[2] == 1 and lines[5] == 5 and lines[6] == 6


def test_reaching_takes_passed_scenarios_on_the_statement_most_of_its_surroundings_first():
    stmt = statement_lines(SOURCE)
    base = {
        "slow": Baseline(outcome="PASSED", duration_s=9.0, lines={"pkg/task.py": frozenset({3})}),
        "fast": Baseline(outcome="PASSED", duration_s=1.0, lines={"pkg/task.py": frozenset({3, 5})}),
        "failed": Baseline(outcome="FAILED", duration_s=0.5, lines={"pkg/task.py": frozenset({3})}),
        "elsewhere": Baseline(outcome="PASSED", duration_s=0.1, lines={"pkg/task.py": frozenset({6})}),
    }
    assert reaching(_mutant(4), baselines=base, stmt=stmt) == ["fast", "slow"]  # fast also ran line 5
    assert reaching(_mutant(5), baselines=base, stmt=stmt) == ["fast"]
    even = {**base, "fast": Baseline(outcome="PASSED", duration_s=1.0, lines={"pkg/task.py": frozenset({3})}),
            "slow": Baseline(outcome="PASSED", duration_s=9.0, lines={"pkg/task.py": frozenset({3, 5})})}
    assert reaching(_mutant(4), baselines=even, stmt=stmt) == ["slow", "fast"]  # more of the code around it first
    assert reaching(_mutant(2), baselines=base, stmt=stmt) == []
    assert reaching(_mutant(4), baselines=base, stmt=stmt, first=frozenset({"slow"})) == ["slow", "fast"]


def test_score_leaves_out_equivalents_and_counts_uncovered_as_survivors():
    outs = [MutantOutcome(mutant=_mutant(i), status=s, diff="", reaching=1)
            for i, s in enumerate(["killed", "killed", "timeout", "survived", "uncovered", "equivalent"], 1)]
    got = score(outs)
    assert got["counts"] == {"killed": 2, "timeout": 1, "survived": 1, "uncovered": 1, "equivalent": 1, "incompetent": 0}
    assert got["score"] == 0.6 and got["score_of_covered"] == 0.75


def test_a_sample_is_the_same_for_a_seed_and_differs_across_seeds():
    population = [_mutant(i) for i in range(1, 200)]
    one = sample(population, size=5, seed=1)
    assert one == sample(population, size=5, seed=1) and len(one) == 5
    assert one != sample(population, size=5, seed=2)
    assert sample(population, size=None, seed=1) == population


def test_an_equivalent_needs_a_reason(tmp_path: Path):
    bad = tmp_path / "eq.yaml"
    bad.write_text("durabletask-dapr:\n  - mutant: 'a.py:1:core/AddNot#0'\n", encoding="utf-8")
    with pytest.raises(ValueError, match="reason"):
        equivalents.load("durabletask-dapr", path=bad)
    assert all(reason for sdk in ("dapr-ext-workflow", "durabletask-dapr") for reason in equivalents.load(sdk).values())


def test_an_unknown_sdk_is_bad_input():
    done = subprocess.run([sys.executable, "-m", "conformance", "mutate", "no-such-sdk"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    assert "unknown SDK 'no-such-sdk'" in done.stderr and "dapr-ext-workflow" in done.stderr
    assert "Traceback" not in done.stderr


def test_resume_keeps_detected_mutants_and_runs_the_others_again(tmp_path: Path):
    import json

    from conformance.mutation.campaign import _resumed

    killed, survived = _mutant(3), _mutant(5)
    report = tmp_path / "r.json"
    entry = {"reaching": 2, "scenarios_run": ["a"], "killed_by": ["a: FAILED"], "seconds": 1.0, "diff": "d"}
    report.write_text(json.dumps({"sdk": "durabletask-dapr", "mutants": [
        {"id": killed.id, "status": "killed", **entry}, {"id": survived.id, "status": "survived", **entry}]}))
    got = _resumed(report, sdk="durabletask-dapr", by_id={m.id: m for m in (killed, survived)})
    assert list(got) == [killed.id, survived.id]
    assert got[killed.id] is not None and got[killed.id].status == "killed" and got[killed.id].killed_by == ("a: FAILED",)
    assert got[survived.id] is None
    with pytest.raises(ValueError, match="not 'dapr-ext-workflow'"):
        _resumed(report, sdk="dapr-ext-workflow", by_id={})


def test_a_resumed_campaign_keeps_how_its_mutants_were_drawn(tmp_path: Path):
    from conformance.mutation.cli import drawn

    report = tmp_path / "r.json"
    report.write_text(json.dumps({"sample": 40, "seed": 1}), encoding="utf-8")
    assert drawn(report) == (40, 1)
    report.write_text(json.dumps({"sample": None, "seed": 0}), encoding="utf-8")
    assert drawn(report) == (None, 0)
    report.write_text(json.dumps({"seed": 0}), encoding="utf-8")
    with pytest.raises(KeyError):
        drawn(report)
