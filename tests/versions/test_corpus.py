"""The history corpus: recording only when asked, filing the PASSED scenarios' histories under their
releases, grouping them per scenario and SDK line, and the replay command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cli import main as conformance_main
from conformance.replay.history import load
from conformance.versions.corpus import RECORD_ENV, Recorded, assemble, groups, record_if_asked
from taskhub_wire import pb


def _fetch(iid: str):
    state = pb.WorkflowState(instanceId=iid, name="main", workflowStatus=pb.ORCHESTRATION_STATUS_COMPLETED)
    started = pb.HistoryEvent(eventId=-1)
    started.executionStarted.name = "main"
    started.executionStarted.workflowInstance.instanceId = iid
    return state, [started]


def _running(iid: str):
    state, events = _fetch(iid)
    state.workflowStatus = pb.ORCHESTRATION_STATUS_RUNNING
    return state, events


def test_nothing_is_recorded_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RECORD_ENV, raising=False)
    record_if_asked(scenario_id="a/b", kind="flow", programs_doc={}, iids=["i1"], fetch=_fetch)
    monkeypatch.setenv(RECORD_ENV, str(tmp_path / "rec"))
    record_if_asked(scenario_id="a/v", kind="vector", programs_doc={}, iids=["i1"], fetch=_fetch)
    assert not (tmp_path / "rec").exists()


def test_terminal_histories_are_filed_under_their_releases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging, corpus = tmp_path / "rec", tmp_path / "histories"
    monkeypatch.setenv(RECORD_ENV, str(staging))
    programs = {"main": {"steps": [{"return": 1}]}}
    record_if_asked(scenario_id="a/ok", kind="flow", programs_doc=programs, iids=["i1"], fetch=_fetch)
    record_if_asked(scenario_id="a/ok", kind="flow", programs_doc=programs, iids=["i2"], fetch=_running)
    record_if_asked(scenario_id="a/bad", kind="flow", programs_doc=programs, iids=["i3"], fetch=_fetch)
    rec = Recorded(engine="reference", engine_version="this-checkout", sdk="durabletask-dapr", sdk_version="0.17.2")
    written = assemble(staging, passed={"a/ok"}, corpus=corpus, recorded=rec)
    assert [p.relative_to(corpus).as_posix() for p in written] == [
        "a/ok/reference-this-checkout/durabletask-dapr-0.17.2/i1.history.json"]
    doc = json.loads(written[0].read_text())
    assert doc["recorded"] == {"engine": "reference", "engineVersion": "this-checkout", "sdk": "durabletask-dapr",
                               "sdkVersion": "0.17.2", "scenario": "a/ok"}
    assert load(written[0]).instance_id == "i1"  # still a capture file
    assert json.loads((corpus / "a/ok/bundle.json").read_text()) == {"programs": programs}
    assert [g.scenario for g in groups(corpus, sdk="durabletask-dapr")] == ["a/ok"]
    assert groups(corpus, sdk="dapr-python") == []


def test_replaying_a_corpus_needs_a_corpus_and_one_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert conformance_main(["replay", "--corpus", str(tmp_path)]) == 2
    assert "--sdk NAME@VERSION" in capsys.readouterr().err
    assert conformance_main(["replay", "--corpus", str(tmp_path), "--sdk", "durabletask-dapr@0.17.4"]) == 2
    assert "no recorded histories there" in capsys.readouterr().err
    assert conformance_main(["replay"]) == 2


def test_machine_paths_are_written_as_their_names() -> None:
    from conformance.versions.corpus import scrub

    text = 'File "/srv/u/.cache/tc/dd-0.17.2/lib/worker.py" and "/srv/u/src/drivers/driver.py", /srv/u/x'
    places = {"cache": Path("/srv/u/.cache/tc"), "root": Path("/srv/u/src"), "home": Path("/srv/u")}
    assert scrub(text, places) == 'File "<cache>/dd-0.17.2/lib/worker.py" and "<root>/drivers/driver.py", <home>/x'
