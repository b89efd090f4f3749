"""A mismatch is charged to the requirement it breaks, once (conformance/attribution.py), and a failed
scenario's text names what the engine refused for its instances (taskhub_core.incidents)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from conformance.attribution import RESERVED, charge, judge, root_causes
from conformance.errors import InputError
from conformance.events import Outcome, ScenarioFinished, from_json, to_json
from conformance.failure_context import engine_incidents
from conformance.reporting.allure import scenario_case
from conformance.reporting.catalogue import load_catalogue
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_scenario
from conformance.verdict import CROSS_WORKER, Level, Mismatch, Subject
from taskhub_core.incidents import Incident, IncidentKind, StaleAction
from tests.mutants.variants import mutant_pair

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
LEVELS = {"A-MUST-001": "MUST", "B-MUST-001": "MUST", "C-SHOULD-001": "SHOULD", "D-MAY-001": "MAY",
          "RPL-DET-001": "MUST", "RPL-EXEC-001": "MUST", "RPL-IDS-001": "INFO", "LIFE-CUSTOM-001": "MUST",
          "ACT-RETRY-001": "MUST", "HIST-DEDUP-001": "MUST", CROSS_WORKER: "INFO"}


def _charge(m: Mismatch, requirements: list[str], charges: dict[Subject, str] | None = None):
    return charge(m, requirements=requirements, levels=LEVELS, charges=charges or {})


# ------------------------------------------------------------------------------------------ the registry


def test_a_plain_mismatch_weighs_once_at_the_strongest_listed_level():
    assert _charge(Mismatch(text="x", subject=Subject.STATUS), ["A-MUST-001", "C-SHOULD-001", "D-MAY-001"]) == (
        ("A-MUST-001",), Level.MUST)
    assert _charge(Mismatch(text="x", subject=Subject.STATUS), ["C-SHOULD-001", "D-MAY-001"]) == (
        ("C-SHOULD-001",), Level.SHOULD)
    assert _charge(Mismatch(text="x"), ["D-MAY-001"]) == (("D-MAY-001",), Level.OBSERVATION)


def test_a_reserved_requirement_takes_only_its_own_subject():
    assert "RPL-DET-001" in RESERVED
    # A vector listing RPL-IDS-001 (INFO) and RPL-DET-001: a wrong action is not what the code does.
    assert _charge(Mismatch(text="x", subject=Subject.ACTIONS), ["RPL-IDS-001", "RPL-DET-001"]) == (
        ("RPL-EXEC-001",), Level.MUST)
    assert _charge(Mismatch(text="x", subject=Subject.DETERMINISM), ["A-MUST-001"]) == (
        ("RPL-DET-001",), Level.MUST)


def test_a_custom_status_falls_under_its_own_requirements():
    m = Mismatch(text="custom_status: expected 'a', got '\"a\"'", subject=Subject.CUSTOM_STATUS)
    assert _charge(m, ["RPL-IDS-001", "RPL-DET-001", "A-MUST-001"]) == (("RPL-EXEC-001",), Level.MUST)
    assert _charge(m, ["LIFE-CUSTOM-001", "A-MUST-001"]) == (("LIFE-CUSTOM-001",), Level.MUST)


def test_a_worker_under_test_is_not_charged_the_engines_requirement():
    m = Mismatch(text="custom status differs", subject=Subject.CUSTOM_STATUS)
    assert charge(m, requirements=["LIFE-CUSTOM-001"], levels=LEVELS, charges={},
                  spared=frozenset({"LIFE-CUSTOM-001"})) == (("RPL-EXEC-001",), Level.MUST)
    from conformance.runner.execute import spared_requirements
    from conformance.scenario.model import Direction

    assert "LIFE-CUSTOM-001" in spared_requirements(Direction.WORKER)
    assert "RPL-EXEC-001" in spared_requirements(Direction.ENGINE)
    assert spared_requirements(Direction.SELF) == frozenset() == spared_requirements(Direction.PAIR)


def test_the_scenario_may_state_where_a_subject_weighs():
    m = Mismatch(text="history must not contain TimerFired", subject=Subject.HISTORY)
    assert _charge(m, ["A-MUST-001", "C-SHOULD-001"], {Subject.HISTORY: "C-SHOULD-001"}) == (
        ("C-SHOULD-001",), Level.SHOULD)
    # Only the subject it names: the status still weighs on the MUST.
    assert _charge(Mismatch(text="s", subject=Subject.STATUS), ["A-MUST-001", "C-SHOULD-001"],
                   {Subject.HISTORY: "C-SHOULD-001"}) == (("A-MUST-001",), Level.MUST)


def test_a_listed_requirement_whose_checks_passed_passes():
    found = [Mismatch(text="custom status differs", subject=Subject.CUSTOM_STATUS),
             Mismatch(text="ids differ", subject=Subject.ACTIONS, level=Level.OBSERVATION)]
    j = judge(found, requirements=["RPL-IDS-001", "RPL-DET-001"], levels=LEVELS)
    verdicts = dict(j.per_requirement)
    assert verdicts["RPL-DET-001"] is Outcome.PASSED and verdicts["RPL-EXEC-001"] is Outcome.FAILED
    assert verdicts["RPL-IDS-001"] is Outcome.OBSERVATION
    per_mismatch = defaultdict(set)
    for index, _rid, verdict in j.marks:
        per_mismatch[index].add(verdict)
    assert all(len(v) == 1 for v in per_mismatch.values())


def test_a_refused_retry_is_the_root_cause_of_what_its_instance_shows():
    action = StaleAction(id=1, kind="scheduleTask", holder="taskScheduled", holder_name="fail", holder_failed=True)
    refused = Incident(kind=IncidentKind.STALE_ANSWER, instance="main-1", action=action,
                       text=f"refused the answer ({action.text}: stale turn)")
    status = Mismatch(text="expected status COMPLETED, got RUNNING", subject=Subject.STATUS, instance="main-1")
    other = Mismatch(text="expected status COMPLETED, got RUNNING", subject=Subject.STATUS, instance="other-1")
    rule = Mismatch(text="R2.4", requirement="HIST-EVENTID-001", subject=Subject.HISTORY_RULE, instance="main-1")
    charged = root_causes([status, other, rule], {"main-1": (refused,)})
    assert charged[0].requirement == "ACT-RETRY-001" and action.text in charged[0].text
    assert charged[1] == other and charged[2] == rule
    j = judge(charged, requirements=["HIST-DEDUP-001"], levels=LEVELS)
    assert dict(j.per_requirement)["ACT-RETRY-001"] is Outcome.FAILED


def test_a_scenario_names_only_known_subjects_and_its_own_requirements(tmp_path: Path):
    body = ("title: t\nrequirements: [LIFE-CUSTOM-001]\nprograms: {main: {steps: [{return: 1}]}}\n"
            "start: {workflow: main}\nexpect: {status: COMPLETED}\ncharges: {%s}\n")
    good = tmp_path / "good.yaml"
    good.write_text(body % "custom_status: LIFE-CUSTOM-001")
    assert load_scenario(good, root=tmp_path).charges == {Subject.CUSTOM_STATUS: "LIFE-CUSTOM-001"}
    for bad, said in (("custom_stats: LIFE-CUSTOM-001", "unknown mismatch subject"),
                      ("status: RPL-DET-001", "do not list")):
        path = tmp_path / "bad.yaml"
        path.write_text(body % bad)
        with pytest.raises(InputError) as exc:
            load_scenario(path, root=tmp_path)
        assert said in str(exc.value)


# ------------------------------------------------------------------------------------- on real runs


def _run(scenario_id: str, mutant: str, tmp_path: Path) -> ScenarioFinished:
    scenario = load_scenario(SCENARIOS / f"{scenario_id}.yaml", root=SCENARIOS)
    scenario = replace(scenario, timeout=min(scenario.timeout, 8.0))
    return run_scenario(scenario, mutant_pair(mutant), work_root=tmp_path, reproduce=f"mutant {mutant}")


def test_a_retry_reusing_its_action_id_breaks_act_retry_not_dedup(tmp_path: Path):
    r = _run("history/duplicate-failure-recorded-once", "retry-reuses-action-id", tmp_path)
    verdicts = dict(r.verdicts)
    assert r.outcome is Outcome.FAILED, r.message
    assert verdicts["ACT-RETRY-001"] is Outcome.FAILED, verdicts
    assert verdicts["HIST-DEDUP-001"] is Outcome.PASSED and verdicts["HIST-ONCE-001"] is Outcome.PASSED, verdicts
    assert r.broken == ("ACT-RETRY-001",)
    refused = [i for i in r.incidents if i.kind is IncidentKind.STALE_ANSWER]
    assert refused and refused[0].action is not None and refused[0].action.holder_failed
    iid = refused[0].instance
    assert f"Engine incidents for instance {iid}:" in r.message
    assert "action id 1 (scheduleTask) is already in history as taskScheduled" in r.message
    # The allure result carries the same record as an attachment, and events.jsonl keeps it as data.
    case = scenario_case(r, catalogue=load_catalogue())
    attached = {a.name: a.body for a in case.attachments}
    assert "action id 1 (scheduleTask) is already in history" in attached["engine incidents"]
    assert from_json(to_json(r)).incidents == r.incidents


def test_a_custom_status_encoded_twice_is_not_a_determinism_failure(tmp_path: Path):
    r = _run("vectors/completion-result", "custom-status-encoded-twice", tmp_path)
    verdicts = dict(r.verdicts)
    assert r.outcome is Outcome.FAILED, r.message
    assert verdicts["RPL-EXEC-001"] is Outcome.FAILED and verdicts["RPL-DET-001"] is Outcome.PASSED, verdicts
    levels = defaultdict(set)
    for f in r.failures:
        levels[f.text].add(f.level)
    assert levels and all(len(v) == 1 for v in levels.values()), levels


def test_an_engine_without_a_record_says_so_or_shows_its_log(tmp_path: Path):
    log = tmp_path / "daprd.log"
    log.write_text("level=info msg=started\n"
                   "level=warning msg=\"abandoning work item for wf-7: action id 1 already in history\"\n"
                   "level=warning msg=\"abandoning work item for wf-8\"\n")
    text = engine_incidents(None, sidecar="daprd", logs=[str(log)], instances=["wf-7"])
    assert "keeps no record" in text and "wf-7: action id 1 already in history" in text and "wf-8" not in text
    assert "none available" in engine_incidents(None, sidecar="daprd", logs=[str(log)], instances=["wf-9"])
    assert "none recorded" in engine_incidents({}, sidecar="reference")


def test_the_editors_schema_knows_every_subject():
    import json

    from conformance.scenario.schema import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["properties"]["charges"]["propertyNames"]["enum"] == [s.value for s in Subject]


def test_a_retry_the_worker_did_not_make_breaks_act_retry_not_dedup(tmp_path: Path):
    r = _run("history/duplicate-failure-recorded-once", "never-retries", tmp_path)
    assert r.outcome is Outcome.FAILED, r.message
    assert r.broken == ("ACT-RETRY-001",), (r.broken, r.message)
    assert "[root cause: the worker did not retry: activity 'fail' failed" in r.message
    assert "1 attempt(s) of the 3 its retry policy allows" in r.message


def test_a_worker_run_charges_the_workers_requirement_not_the_engines():
    """An SDK that echoes no token (dapr-ext-workflow 0.5.0) on the reference engine: the status it ends in is
    TOK-ECHO-001 (worker), not the engine's TOK-STALE-001 and TOK-ZOMBIE-001 the scenario lists beside it."""
    levels = {"TOK-ECHO-001": "MUST", "TOK-STALE-001": "MUST", "TOK-ZOMBIE-001": "MUST"}
    status = Mismatch(text="expected status COMPLETED, got FAILED", subject=Subject.STATUS, instance="main-1")
    listed = ["TOK-ECHO-001", "TOK-STALE-001", "TOK-ZOMBIE-001"]
    engine = frozenset({"TOK-STALE-001", "TOK-ZOMBIE-001"})
    assert judge([status], requirements=listed, levels=levels, spared=engine).broken == ("TOK-ECHO-001",)
    assert judge([status], requirements=listed, levels=levels).broken == tuple(listed)  # both sides tested
    # A scenario that lists only the other side's requirements still fails on them.
    assert judge([status], requirements=listed[1:], levels=levels, spared=engine).broken == tuple(listed[1:])
