"""The history corpus: recording only when asked, filing the PASSED scenarios' histories under their
releases, grouping them per scenario and SDK line, and the replay command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cli import main as conformance_main
from conformance.replay.history import load
from conformance.versions.corpus import (RECORD_ENV, Recorded, Replayed, assemble, groups, judge_replay,
                                        record_if_asked, render_replay)
from conformance.versions.explained import EXPLAINED, ExplainedError, load_explained
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


def test_recorded_globs_select_recordings_by_their_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging, corpus = tmp_path / "rec", tmp_path / "histories"
    monkeypatch.setenv(RECORD_ENV, str(staging))
    record_if_asked(scenario_id="a/ok", kind="flow", programs_doc={}, iids=["i1"], fetch=_fetch)
    for engine, version in (("reference", "this-checkout"), ("durabletask-go", "v0.12.1")):
        assemble(staging, passed={"a/ok"}, corpus=corpus,
                 recorded=Recorded(engine=engine, engine_version=version, sdk="durabletask-go", sdk_version="v0.14.0"))

    def files(*globs: str) -> list[str]:
        return [f.relative_to(corpus).as_posix() for g in groups(corpus, recorded=globs) for f in g.histories]

    assert files() == ["a/ok/durabletask-go-v0.12.1/durabletask-go-v0.14.0/i1.history.json",
                       "a/ok/reference-this-checkout/durabletask-go-v0.14.0/i1.history.json"]
    assert files("reference-*/*") == ["a/ok/reference-this-checkout/durabletask-go-v0.14.0/i1.history.json"]
    assert files("*/dapr-python-*") == []
    assert conformance_main(["replay", "--corpus", str(corpus), "--sdk", "durabletask-go@v0.12.1",
                             "--recorded", "daprd-*/*"]) == 2


def _replayed(file: str, verdict: str) -> Replayed:
    return Replayed(scenario=file.split("/")[0], file=file, recorded={}, verdict=verdict, headline="h")


EXPLAINED_DOC = """
explained:
  - sdk: durabletask-go
    releases: [v0.12.1]
    histories: "a/*/durabletask-go-v0.14.0/*"
    verdict: NONDETERMINISM
    trace: "task/orchestrator.go:1 of v0.12.1"
    fixed_by: "dapr/durabletask-go#1, commit abc"
"""


def test_an_explained_failure_passes_an_untraced_or_stale_one_fails(tmp_path: Path) -> None:
    (tmp_path / EXPLAINED).write_text(EXPLAINED_DOC)
    expl = load_explained(tmp_path)
    f = "a/reference-this-checkout/durabletask-go-v0.14.0/i.history.json"
    judged = judge_replay([_replayed(f, "NONDETERMINISM")], expl, sdk="durabletask-go", release="v0.12.1")
    assert judged.ok and judged.explained[0][1] is expl[0]
    assert "fixed by: dapr/durabletask-go#1, commit abc" in render_replay(judged, sdk="durabletask-go v0.12.1")
    # the same history with another verdict, on another release, or in another scenario: untraced
    assert not judge_replay([_replayed(f, "STALL")], expl, sdk="durabletask-go", release="v0.12.1").ok
    assert not judge_replay([_replayed(f, "NONDETERMINISM")], expl, sdk="durabletask-go", release="v0.14.0").ok
    other = "b/reference-this-checkout/durabletask-go-v0.14.0/i.history.json"
    assert judge_replay([_replayed(other, "NONDETERMINISM")], expl, sdk="durabletask-go",
                        release="v0.12.1").unexplained
    # fixed since: the explanation is stale, and says so
    stale = judge_replay([_replayed(f, "CLEAN")], expl, sdk="durabletask-go", release="v0.12.1")
    assert stale.stale == expl and not stale.ok
    assert "Stale explanations" in render_replay(stale, sdk="durabletask-go v0.12.1")
    # an explanation whose histories were not replayed is neither used nor stale
    assert judge_replay([_replayed(other, "CLEAN")], expl, sdk="durabletask-go", release="v0.12.1").ok


@pytest.mark.parametrize("text, says", [
    ("explained: 3", "an 'explained:' list"),
    ("explained: [{sdk: x}]", "needs exactly the keys"),
    (EXPLAINED_DOC.replace("NONDETERMINISM", "CLEAN"), "is not one of"),
    (EXPLAINED_DOC.replace("NONDETERMINISM", "[NONDETERMINISM]"), "is not one of"),
    (EXPLAINED_DOC.replace("[v0.12.1]", "v0.12.1"), "releases must be a list"),
    (EXPLAINED_DOC.replace('"dapr/durabletask-go#1, commit abc"', '""'), "must be non-empty text"),
    ("explained: [", "not YAML"),
])
def test_a_bad_explained_file_is_named(tmp_path: Path, text: str, says: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / EXPLAINED).write_text(text)
    with pytest.raises(ExplainedError, match=says):
        load_explained(tmp_path)
    (tmp_path / "a/ok/reference-this-checkout/durabletask-dapr-0.17.4").mkdir(parents=True)
    (tmp_path / "a/ok/bundle.json").write_text("{}")
    (tmp_path / "a/ok/reference-this-checkout/durabletask-dapr-0.17.4/i.history.json").write_text("{}")
    assert conformance_main(["replay", "--corpus", str(tmp_path), "--sdk", "durabletask-dapr@0.17.4"]) == 2
    assert says in capsys.readouterr().err
