"""The engine differential's normaliser and comparison: free values go, relations stay."""

from __future__ import annotations

import base64

from conformance.enginediff.compare import Aspect, compare
from conformance.enginediff.normalise import normalise, time_relations
from conformance.enginediff.record import Call, InstanceRecord, Recording
from taskhub_wire import pb


def _history(iid: str, exec_id: str, times: list[str]) -> tuple[dict, ...]:
    return (
        {"eventId": -1, "timestamp": times[0], "workflowStarted": {}},
        {"eventId": -1, "timestamp": times[1], "executionStarted": {
            "name": "W", "workflowInstance": {"instanceId": iid, "executionId": exec_id}}},
        {"eventId": 1, "timestamp": times[2], "timerCreated": {"fireAt": times[3]}},
        {"eventId": -1, "timestamp": times[4], "workflowStarted": {}},
        {"eventId": -1, "timestamp": times[5], "timerFired": {"timerId": 1, "fireAt": times[3]}},
    )


def _recording(iid: str, exec_id: str, times: list[str], *, app: str = "") -> Recording:
    item = {"workflowRequest": {"instanceId": iid, "executionId": exec_id}, "completionToken": f"tok-{iid}"}
    call = Call(rpc="RaiseEvent", request={"instanceId": iid, "name": "go"}, code="OK", details="", response={})
    return Recording(scenario="s", engine="e", outcome="PASSED", names={iid: "main"},
                     instances={iid: InstanceRecord(history=_history(iid, exec_id, times), work_items=(item,),
                                                    transitions=("RUNNING", "COMPLETED"))},
                     calls=(call,))


T1 = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.1Z", "2026-01-01T00:00:00.2Z", "2026-01-01T00:00:05Z",
      "2026-01-01T00:00:06Z", "2026-01-01T00:00:05.5Z"]
T2 = ["2027-03-01T10:00:00Z", "2027-03-01T10:00:00.3Z", "2027-03-01T10:00:00.4Z", "2027-03-01T10:00:05Z",
      "2027-03-01T10:00:07Z", "2027-03-01T10:00:06Z"]


def test_free_values_are_normalised_away():
    a = normalise(_recording("main-s-abc123", "exec-1", T1))
    b = normalise(_recording("main-s-ffffff", "9f8e", T2))
    assert compare("s", "e", a, b) == []
    started = a["instances"]["main"]["history"][1]["executionStarted"]["workflowInstance"]
    assert started == {"instanceId": "<main>", "executionId": "<executionId1>"}
    assert a["instances"]["main"]["work_items"][0]["workflowRequest"]["executionId"] == "<executionId1>"


def test_relations_are_kept():
    # The timer fires at its creation time (as durabletask-go stamps it): before its fireAt.
    t3 = list(T2)
    t3[5] = t3[2]
    a = normalise(_recording("main-s-1", "x", T1))
    b = normalise(_recording("main-s-2", "y", t3))
    diffs = compare("s", "durabletask-go", a, b)
    assert [(d.aspect, d.path) for d in diffs] == [(Aspect.HISTORY, "[4].time")]
    assert diffs[0].reference == "after its timerCreated, after its fireAt"
    assert diffs[0].other == "at its timerCreated, before its fireAt"
    assert diffs[0].shape == "[].time"


def test_workflow_started_order_and_missing_times():
    rel = time_relations([{"timestamp": "2026-01-01T00:00:01Z", "workflowStarted": {}},
                          {"timestamp": "2026-01-01T00:00:01Z", "workflowStarted": {}},
                          {"executionStarted": {}}])
    assert rel == ["first turn", "at the previous WorkflowStarted", "timestamp missing"]


def test_a_different_answer_to_a_call_is_a_difference():
    a = _recording("main-s-1", "x", T1)
    b = _recording("main-s-2", "y", T1)
    b = Recording(scenario="s", engine="e", outcome="PASSED", names=b.names, instances=b.instances,
                  calls=(Call(rpc="RaiseEvent", request={"instanceId": "main-s-2", "name": "go"},
                              code="NOT_FOUND", details="instance main-s-2 not found", response={}),))
    diffs = compare("s", "e", normalise(a), normalise(b))
    assert {(d.path, d.reference, d.other) for d in diffs} == {
        ("[0].code", "OK", "NOT_FOUND"), ("[0].details", "", "instance <main> not found")}


def _propagating(iid: str, raw_events: list[str]) -> Recording:
    chunk = {"appId": "caller", "instanceId": iid, "workflowName": "W", "rawEvents": raw_events}
    item = {"activityRequest": {"name": "a", "orchestrationInstance": {"instanceId": iid},
                                "propagatedHistory": {"scope": "HISTORY_PROPAGATION_SCOPE_LINEAGE", "chunks": [chunk]}}}
    return Recording(scenario="s", engine="e", outcome="PASSED", names={iid: "main"},
                     instances={iid: InstanceRecord(history=(), work_items=(item,), transitions=())}, calls=())


def _raw(*, seconds: int, name: str, router: str = "") -> str:
    ev = pb.HistoryEvent(eventId=1)
    ev.timestamp.seconds = seconds
    ev.taskScheduled.name = name
    if router:
        ev.router.sourceAppID = router
    return base64.b64encode(ev.SerializeToString()).decode()


def test_propagated_raw_events_compare_as_events():
    # The bytes differ by the time and the router the real engines stamp: no difference once decoded.
    a = normalise(_propagating("main-s-1", [_raw(seconds=10, name="x")]))
    b = normalise(_propagating("main-s-2", [_raw(seconds=99, name="x", router="caller")]))
    assert compare("s", "daprd", a, b) == []
    # A different event inside the chunk is a difference, at the event's own field.
    c = normalise(_propagating("main-s-3", [_raw(seconds=10, name="y")]))
    diffs = compare("s", "daprd", a, c)
    assert [d.path for d in diffs] == ["[0].activityRequest.propagatedHistory.chunks[0].rawEvents[0].taskScheduled.name"]
