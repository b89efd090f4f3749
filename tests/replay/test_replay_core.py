"""The replay's own logic, without an SDK: histories from the reference executor's `simulate`,
answered by the reference executor (`execute`) in this process; the file format, its schema and
its errors; and the CLI's handling of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conformance.replay import history as hist
from conformance.replay import turns as turns_mod
from conformance.replay.judge import Verdict
from conformance.replay.session import Mode, replay_instance
from taskhub_programs import parse_bundle
from fake_worker.replay import execute
from fake_worker.replay.simulate import simulate
from taskhub_wire import pb
from tests.replay import support

RESERVE = {"call_activity": {"name": "echo", "input": "reserve"}, "as": "r"}
AUDIT = {"call_activity": {"name": "sleep", "input": 0}}  # another activity than reserve/charge
WAIT = {"wait_event": "approve"}
CHARGE = {"call_activity": {"name": "echo", "input": "charge"}, "as": "c"}
DONE = {"return": {"$concat": ["${r}", "${c}"]}}


def bundle(*steps: dict, name: str = "order", extra: dict | None = None):
    return parse_bundle({"programs": {name: {"steps": list(steps)}, **(extra or {})}})


V1 = bundle(RESERVE, WAIT, CHARGE, DONE)
V2 = bundle(RESERVE, AUDIT, WAIT, CHARGE, DONE)
V2_PATCHED = bundle(RESERVE, {"if_patched": {"patch": "audit", "then": [AUDIT], "else": []}}, WAIT, CHARGE, DONE)
RENAMED = bundle(RESERVE, WAIT, CHARGE, DONE, name="order_v2")


def captured(*, approve: bool, iid: str = "i-1", program=V1, name: str = "order") -> hist.CapturedHistory:
    turns = simulate(program, name, "x", instance_id=iid, events=[("approve", True, 30)] if approve else [])
    events = list(turns[-1].history)
    state = pb.WorkflowState(instanceId=iid, name=name,
                             workflowStatus=pb.ORCHESTRATION_STATUS_COMPLETED if approve
                             else pb.ORCHESTRATION_STATUS_RUNNING)
    return hist.make(state=state, events=events, source="test")


def answering(program):
    def answer(instance_id, past, new):
        return execute(program, instance_id=instance_id, past=past, new=new).response(instance_id=instance_id,
                                                                                      completion_token="")
    return answer


def index_of(h: hist.CapturedHistory, kind: str, after: int = 0) -> int:
    return next(i for i, e in enumerate(h.events) if i >= after and e.HasField(kind))


@pytest.mark.parametrize("mode", list(Mode))
def test_unchanged_code_replays_cleanly(mode: Mode) -> None:
    for h in (captured(approve=True), captured(approve=False)):
        r = replay_instance(h, answering(V1), mode=mode)
        assert r.verdict is Verdict.CLEAN, r.headline()


@pytest.mark.parametrize("mode", list(Mode))
def test_an_activity_added_in_the_middle_is_nondeterminism_at_the_event_it_displaces(mode: Mode) -> None:
    h = captured(approve=True)
    r = replay_instance(h, answering(V2), mode=mode)
    assert r.verdict is Verdict.NONDETERMINISM
    # The reference worker waits behind a far-future timer (as dx does): audit takes its id.
    want = index_of(h, "timerCreated", after=index_of(h, "taskCompleted"))
    assert r.divergence is not None and r.divergence.event_index == want
    assert "'sleep'" in r.divergence.summary
    assert any(line.startswith(">") for line in r.divergence.history_side)


def test_is_patched_keeps_old_instances_on_their_path_and_new_ones_take_it() -> None:
    for h in (captured(approve=True), captured(approve=False)):
        assert replay_instance(h, answering(V2_PATCHED)).verdict is Verdict.CLEAN
    # A history recorded by the patched code itself replays cleanly on it, and not on v1.
    new = captured(approve=True, program=V2_PATCHED)
    assert replay_instance(new, answering(V2_PATCHED)).verdict is Verdict.CLEAN
    stalled = replay_instance(new, answering(V1))
    assert stalled.verdict is Verdict.STALL and stalled.divergence is not None
    assert stalled.divergence.stall_reason == "PATCH_MISMATCH"
    assert stalled.divergence.stall_description == "Patch mismatch. History patches: [audit], current patches: []. "


def test_a_renamed_workflow_is_not_registered() -> None:
    r = replay_instance(captured(approve=True), answering(RENAMED))
    assert r.verdict is Verdict.NOT_REGISTERED, r.headline()


def test_a_missing_version_stalls_with_version_not_available() -> None:
    versioned = parse_bundle({"programs": {"order": {"versions": {"v1": {"steps": [RESERVE, WAIT, CHARGE, DONE]}}}}})
    h = captured(approve=True, program=versioned)
    assert replay_instance(h, answering(versioned)).verdict is Verdict.CLEAN
    only_v2 = parse_bundle({"programs": {"order": {"versions": {"v2": {"steps": [RESERVE, WAIT, CHARGE, DONE]}}}}})
    r = replay_instance(h, answering(only_v2))
    assert r.verdict is Verdict.STALL and r.divergence is not None
    assert (r.divergence.stall_reason, r.divergence.stall_description) == ("VERSION_NOT_AVAILABLE",
                                                                          "Version not available: v1")


def test_a_changed_result_is_nondeterminism_at_the_completion() -> None:
    h = captured(approve=True)
    other = bundle(RESERVE, WAIT, CHARGE, {"return": "something else"})
    r = replay_instance(h, answering(other))
    assert r.verdict is Verdict.NONDETERMINISM and r.divergence is not None
    assert r.divergence.event_index == index_of(h, "executionCompleted")


def test_no_answer_is_an_error_not_a_verdict_on_the_code() -> None:
    r = replay_instance(captured(approve=True), lambda iid, past, new: None)
    assert r.verdict is Verdict.ERROR and "did not answer" in r.headline()


def test_turns_are_split_at_workflow_started_and_replayed_as_past() -> None:
    h = captured(approve=True)
    cut = turns_mod.split(list(h.events))
    assert [h.events[t.start].HasField("workflowStarted") for t in cut] == [True] * len(cut)
    assert sum(len(t.inbox) + len(t.recorded) + 1 for t in cut) == len(h.events)
    past, new = turns_mod.request(list(h.events), cut[1])
    assert len(new) == 1 and new[0].HasField("workflowStarted")
    assert new[0].timestamp == h.events[cut[1].start].timestamp
    assert not any(e.WhichOneof("eventType") in turns_mod.ACTION_EVENTS for e in past[cut[1].start:])


def test_the_file_round_trips_and_matches_its_schema(tmp_path: Path) -> None:
    h = captured(approve=True, iid="a/b c")
    path = hist.write(h, tmp_path)
    assert path.name == "a%2Fb%20c.history.json"
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, json.loads(hist.SCHEMA_PATH.read_text()))
    back = hist.load(path)
    assert (back.instance_id, back.name, back.status) == ("a/b c", "order", "COMPLETED")
    assert list(back.events) == list(h.events)


def test_the_schema_knows_every_event_kind() -> None:
    from taskhub_wire.kinds import EVENT_KINDS

    schema = json.loads(hist.SCHEMA_PATH.read_text())
    listed = {k for k in schema["$defs"]["event"]["properties"] if k not in ("eventId", "timestamp", "router")}
    assert listed == {k[0].lower() + k[1:] for k in EVENT_KINDS}


@pytest.mark.parametrize(("doc", "message"), [
    ([{"namespace": "", "appID": "a", "play": 1, "type": "ExecutionStarted", "name": "x"}], "dapr workflow history"),
    ({"format": "other"}, "\"format\" is 'other'"),
    ({"format": hist.FORMAT, "version": 9, "instance": {}, "events": []}, "version 9 is not supported"),
    ({"format": hist.FORMAT, "version": 1, "instance": {}, "events": []}, "\"events\" is empty"),
    ({"format": hist.FORMAT, "version": 1, "instance": {}, "events": [{"eventId": 1}]}, "events[0] has no event type"),
    ({"format": hist.FORMAT, "version": 1, "instance": {},
      "events": [{"workflowStarted": {}}]}, "no ExecutionStarted"),
    ({"format": hist.FORMAT, "version": 1, "instance": {"workflowStatus": 5},
      "events": [{"timerFired": {"timerId": "x"}}]}, "is not a"),
])
def test_bad_history_files_get_a_clear_error(tmp_path: Path, doc: object, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(hist.HistoryFileError) as info:
        hist.load(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_old_upstream_event_names_load(tmp_path: Path) -> None:
    h = captured(approve=True)
    doc = hist.to_document(h)
    for ev in doc["events"]:
        if "workflowStarted" in ev:
            ev["orchestratorStarted"] = ev.pop("workflowStarted")
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    assert list(hist.load(path).events) == list(h.events)


def test_cli_bad_input_exits_2_with_the_reason(tmp_path: Path) -> None:
    rc, out, err = support.cli("replay", str(tmp_path / "missing.json"), "--reports", str(tmp_path / "r"))
    assert rc == 2 and "no such file or folder" in err and "Traceback" not in err
    (tmp_path / "x.json").write_text("{not json")
    rc, out, err = support.cli("replay", str(tmp_path / "x.json"), "--reports", str(tmp_path / "r"))
    assert rc == 2 and "x.json:1:2: not JSON" in err
    assert not (tmp_path / "r").exists()  # nothing written on bad input
    rc, out, err = support.cli("capture", "--from", "127.0.0.1:1", "--all", "--out", str(tmp_path / "h"))
    assert rc == 1 and "ListInstanceIDs" in err and "is the engine running" in err
    rc, out, err = support.cli("capture", "--from", "127.0.0.1:1", "--status", "BOGUS", "--out", str(tmp_path / "h"))
    assert rc == 2 and "unknown status 'BOGUS'" in err


def test_capture_from_the_reference_sidecar_pages_and_filters(tmp_path: Path) -> None:
    """ListInstanceIDs paging, --status filtering and the API token, on the reference sidecar run
    by the reference worker."""
    import threading

    from fake_sidecar.server import SidecarServer
    from fake_worker.client import Worker, WorkerOptions

    server = SidecarServer.start(port=0, db=":memory:", api_token="t0k")
    worker = Worker(bundle=V1, options=WorkerOptions(sidecar=server.address, api_token="t0k"))
    thread = threading.Thread(target=worker.run, daemon=True)
    try:
        thread.start()
        ids = [f"cap-{i}" for i in range(7)]
        for iid in ids:
            server.engine.start_instance(instance_id=iid, name="order", input='"x"', scheduled_start_ns=None,
                                         enforce_unique=False, tags={})
        for iid in ids:  # each has run its first turns and waits for "approve"
            assert server.engine.wait(iid, lambda v: len(server.engine.history(v.iid)) >= 5, timeout=30,
                                      is_active=lambda: True) is not None
        from conformance.replay import capture as cap

        old = cap.PAGE_SIZE
        cap.PAGE_SIZE = 2  # several pages for 7 instances
        try:
            rc, out, err = support.cli("capture", "--from", server.address, "--api-token", "t0k", "--all",
                                       "--out", str(tmp_path / "all"))
        finally:
            cap.PAGE_SIZE = old
        assert rc == 0, err
        assert sorted(p.name for p in (tmp_path / "all").glob("*.json")) == sorted(f"{i}.history.json" for i in ids)
        rc, out, err = support.cli("capture", "--from", server.address, "--all", "--out", str(tmp_path / "no"))
        assert rc == 1 and "UNAUTHENTICATED" in err and "--api-token" in err
        rc, out, err = support.cli("capture", "--from", server.address, "--api-token", "t0k", "--status",
                                   "COMPLETED", "--out", str(tmp_path / "done"))
        assert rc == 0 and not list((tmp_path / "done").glob("*.json"))  # none approved: none completed
    finally:
        worker.stop()
        server.stop()


def test_the_replay_sidecar_starts_no_instance() -> None:
    """A worker's app that starts a workflow at boot gets FAILED_PRECONDITION, not a running
    instance whose activities would run."""
    import grpc

    from conformance.replay.session import ReplaySidecar
    from taskhub_wire.rpc import TaskHubClient

    sc = ReplaySidecar.start()
    try:
        with grpc.insecure_channel(sc.address) as ch:
            with pytest.raises(grpc.RpcError) as info:
                TaskHubClient(ch).call("StartInstance", pb.CreateInstanceRequest(instanceId="x", name="order"),
                                       timeout=10)
        assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "only serves recorded turns" in info.value.details()
        assert sc.server.engine.get_instance("x") is None
    finally:
        sc.stop()


@pytest.mark.parametrize("mode", list(Mode))
def test_an_action_made_later_than_recorded_is_nondeterminism_where_history_records_it(mode: Mode) -> None:
    """v1 runs two activities in parallel, v2 one after the other: in turn 1 history records both,
    the code makes only the first. The quick check of --mode fast sees it through the worker's own
    replay check (the reference worker fails as dapr-ext-workflow does)."""
    parallel = bundle({"all": [{"call_activity": {"name": "echo", "input": 1}},
                               {"call_activity": {"name": "sleep", "input": 0}}], "as": "r"},
                      {"return": "${r}"})
    sequential = bundle({"call_activity": {"name": "echo", "input": 1}, "as": "a"},
                        {"call_activity": {"name": "sleep", "input": 0}, "as": "b"},
                        {"return": ["${a}", "${b}"]})
    h = captured(approve=False, program=parallel)
    assert replay_instance(h, answering(parallel), mode=mode).verdict is Verdict.CLEAN
    r = replay_instance(h, answering(sequential), mode=mode)
    assert r.verdict is Verdict.NONDETERMINISM and r.divergence is not None
    second = [i for i, e in enumerate(h.events) if e.HasField("taskScheduled")][1]
    assert (r.divergence.turn, r.divergence.event_index) == (1, second)


def test_reports_one_junit_case_and_one_allure_result_per_instance(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from conformance.replay import report

    results = [replay_instance(captured(approve=True, iid="clean-1"), answering(V1)),
               replay_instance(captured(approve=True, iid="bad-1"), answering(V2)),
               replay_instance(captured(approve=True, iid="gone-1"), answering(RENAMED))]
    written = report.write_reports(results, tmp_path)
    suite = ET.parse(written["junit"]).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"clean-1", "bad-1", "gone-1"}
    assert list(cases["clean-1"]) == []
    assert cases["bad-1"].find("failure").get("type") == "NONDETERMINISM"  # type: ignore[union-attr]
    assert cases["gone-1"].find("failure").get("type") == "NOT_REGISTERED"  # type: ignore[union-attr]
    allure = [json.loads(p.read_text()) for p in (tmp_path / "allure-results").glob("*-result.json")]
    assert sorted(a["status"] for a in allure) == ["failed", "failed", "passed"]
    for a in allure:
        assert (tmp_path / "allure-results" / a["attachments"][0]["source"]).is_file()
    page = (tmp_path / "instances" / "bad-1.md").read_text()
    assert "| history (recorded) | the code answers |" in page and "> #" in page
    summary = json.loads(written["json"].read_text())["instances"]
    assert [s["verdict"] for s in summary] == ["CLEAN", "NONDETERMINISM", "NOT_REGISTERED"]
