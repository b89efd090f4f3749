"""The engine differential's fates: each is as narrow as what it explains and backed by what it
cites, the committed report agrees with the table, and a difference nobody explained is reported
as unexplained. (Whether a fate is still needed is not checked: races and some declared gaps, such
as STALL-EXIT-001's, show in one run and not the next.)"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from conformance.enginediff import fates, report
from conformance.enginediff.compare import Aspect, Difference
from conformance.enginediff.fates import Explanation, Fate, fate_of
from conformance.library import find_library
from conformance.reporting.catalogue import load_catalogue
from conformance.targets.registry import load_targets

TABLE = fates.load()
LIBRARY = find_library()
REPORT = LIBRARY.reports / "engine-differential.json"
RULES = LIBRARY.root / "docs" / "engine-rules.md"
_RULE = re.compile(r"\bR\d+\.\d+\b")
_REQUIREMENT = re.compile(r"\b[A-Z]+-[A-Z]+-\d{3}\b")
_SOURCE = re.compile(r"[\w/.-]+\.(go|java|py|ts)(:\d+)?")


def _label(e: Explanation) -> str:
    return f"{e.engine} {e.aspect} {e.shape!r} {','.join(e.scenario)} -> {e.fate.value}"


@functools.cache
def _rule_headings() -> set[str]:
    return set(re.findall(r"^### (R\d+\.\d+)\b", RULES.read_text(encoding="utf-8"), flags=re.M))


@functools.cache
def _catalogue():
    return load_catalogue()


@functools.cache
def _declared_gaps(engine: str) -> set[str]:
    pair = load_targets().pair(engine, "reference")
    return {g.requirement for g in pair.sidecar.gaps}


def test_no_catch_all_fate():
    """A fate that applies to every scenario names the one kind of difference it explains."""
    broad = [_label(e) for e in TABLE
             if "*" in e.scenario and (e.aspect == "*" or e.shape in (".*", ".+"))]
    assert not broad, f"fates that explain any difference of every scenario: {broad}"


@pytest.mark.parametrize("entry", TABLE, ids=_label)
def test_each_fate_is_backed_by_what_it_cites(entry: Explanation):
    rules, catalogue = _rule_headings(), _catalogue()
    cited_rules = set(_RULE.findall(entry.cite))
    cited_reqs = set(_REQUIREMENT.findall(entry.cite))
    assert cited_rules <= rules, f"{_label(entry)} cites {sorted(cited_rules - rules)}, not in docs/engine-rules.md"
    assert all(r in catalogue for r in cited_reqs), f"{_label(entry)} cites an unknown requirement: {entry.cite}"
    assert entry.why.strip(), f"{_label(entry)} says not why"
    if entry.fate is Fate.RULE:
        assert cited_rules, f"{_label(entry)}: a rule fate names its R-number"
    elif entry.fate is Fate.GAP and entry.aspect == "outcome" and "KNOWN_FAILURE" in entry.other:
        assert "targets.yaml" in entry.cite  # the runner matched the scenario to a declared gap itself
    elif entry.fate is Fate.GAP:
        assert cited_reqs, f"{_label(entry)}: a gap fate names the requirement of the declared gap"
        engines = ["daprd", "durabletask-go"] if entry.engine == "*" else [entry.engine]
        for engine in engines:
            missing = {r for r in cited_reqs} - _declared_gaps(engine)
            assert len(missing) < len(cited_reqs), \
                f"{_label(entry)}: {sorted(cited_reqs)} is no declared gap of {engine} (targets.yaml)"
    elif entry.fate is Fate.DEFECT:
        assert _SOURCE.search(entry.cite) or _SOURCE.search(entry.why), \
            f"{_label(entry)}: a defect names the engine's source lines"
    elif entry.fate is Fate.TIMING:
        assert cited_rules or cited_reqs, f"{_label(entry)}: a race names the rule or requirement it is about"


def _differences() -> list[tuple[Difference, dict]]:
    doc = json.loads(REPORT.read_text(encoding="utf-8"))
    return [(Difference(scenario=r["scenario"], engine=r["engine"], instance=r["instance"], aspect=Aspect(r["aspect"]),
                        path=r["path"], reference=r["reference"], other=r["other"]), r) for r in doc["rows"]]


def test_the_committed_report_has_the_tables_fates_and_none_unexplained():
    rows = _differences()
    assert rows, "reports/engine-differential.json has no rows"
    wrong = []
    for d, row in rows:
        e = fate_of(d, TABLE)
        got = (e.fate.value, e.cite) if e else (Fate.UNEXPLAINED.value, "")
        if got != (row["fate"], row["cite"]):
            wrong.append(f"{d.engine} {d.scenario} {d.aspect.value} {d.path}: report {row['fate']} "
                         f"({row['cite']}), table {got[0]} ({got[1]})")
    assert not wrong, "the report was not written with this table (run --compare-only again):\n" + "\n".join(wrong[:20])
    unexplained = [f"{d.engine} {d.scenario} {d.aspect.value} {d.path}" for d, _ in rows if fate_of(d, TABLE) is None]
    assert not unexplained, unexplained[:20]


def test_a_difference_with_no_fate_is_reported_unexplained(tmp_path: Path):
    stray = Difference(scenario="nowhere/no-such-scenario", engine="daprd", instance="main", aspect=Aspect.HISTORY,
                       path="[3].taskCompleted.result", reference='"a"', other='"b"')
    assert fate_of(stray, TABLE) is None
    paths = report.write(out_dir=tmp_path, diffs=[stray], table=TABLE,
                         runs={"reference": {stray.scenario: "PASSED"}, "daprd": {stray.scenario: "PASSED"}},
                         command="conformance engines-diff --compare-only")
    doc = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert doc["by_fate"] == {"daprd": {"unexplained": 1}}
    assert doc["rows"][0]["fate"] == "unexplained" and doc["rows"][0]["cite"] == ""
    assert "— unexplained" in paths["md"].read_text(encoding="utf-8")


def test_a_fate_explains_only_what_it_names():
    entry = Explanation(engine="durabletask-go", aspect="history", shape=r"\[\]\.time", scenario=("timers/*",),
                        other=".*", fate=Fate.RULE, cite="R2.6", why="test")
    hit = Difference(scenario="timers/timer-fires", engine="durabletask-go", instance="main", aspect=Aspect.HISTORY,
                     path="[4].time", reference="after", other="before")
    assert fate_of(hit, [entry]) is entry
    for miss in (Difference(**{**hit.__dict__, "engine": "daprd"}),
                 Difference(**{**hit.__dict__, "scenario": "events/one"}),
                 Difference(**{**hit.__dict__, "aspect": Aspect.WORK_ITEMS}),
                 Difference(**{**hit.__dict__, "path": "[4].timerFired.fireAt"})):
        assert fate_of(miss, [entry]) is None, miss
