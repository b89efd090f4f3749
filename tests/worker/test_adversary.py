"""Each adversary mode, with what it sends: unit level (the messages) and against the reference sidecar."""

from __future__ import annotations

import json
import threading
import time
import uuid

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from fake_worker.adversary import Adversary, AdversaryError, Match, Rule, parse_rules
from fake_worker.client import Worker, WorkerOptions
from taskhub_programs import parse_bundle
from taskhub_wire import pb
from taskhub_wire.kinds import event_kind
from taskhub_wire.rpc import TaskHubClient


def activity_item(token: str, task_id: int = 1, iid: str = "i") -> pb.WorkItem:
    item = pb.WorkItem(completionToken=token)
    item.activityRequest.name = "echo"
    item.activityRequest.taskId = task_id
    item.activityRequest.workflowInstance.instanceId = iid
    return item


def turn_item(token: str, iid: str = "i") -> pb.WorkItem:
    item = pb.WorkItem(completionToken=token)
    item.workflowRequest.instanceId = iid
    return item


def activity_response(item: pb.WorkItem) -> pb.ActivityResponse:
    r = pb.ActivityResponse(instanceId="i", taskId=item.activityRequest.taskId, completionToken=item.completionToken)
    r.result.value = '"ok"'
    return r


def turn_response(item: pb.WorkItem) -> pb.WorkflowResponse:
    r = pb.WorkflowResponse(instanceId="i", completionToken=item.completionToken)
    a = r.actions.add(id=1)
    a.scheduleTask.name = "echo"
    r.version.patches.append("p1")
    return r


def test_zombie_sends_stale_token_then_the_right_one():
    adv = Adversary(rules=[Rule(mode="zombie", match=Match(kind="activity"))])
    first, second = activity_item("t1"), activity_item("t2")
    adv.seen(first)  # the worker remembers every dispatch as it arrives, answered or not
    assert [s.message.completionToken for s in adv.activity(first, activity_response(first))] == ["t1"]
    adv.seen(second)
    sends = adv.activity(second, activity_response(second))
    assert [s.message.completionToken for s in sends] == ["t1", "t2"]
    assert json.loads(sends[0].message.result.value) == "zombie"
    assert adv.zombies_sent == [sends[0].message.result.value]


def test_complete_twice_and_never_complete():
    twice = Adversary(rules=[Rule(mode="complete_twice")])
    item = activity_item("t")
    assert len(twice.activity(item, activity_response(item))) == 2
    t = turn_item("w")
    assert len(twice.turn(t, turn_response(t))) == 2
    never = Adversary(rules=[Rule(mode="never_complete")])
    assert never.activity(item, activity_response(item)) == []
    assert never.turn(t, turn_response(t)) == []


def test_wrong_patches_nondeterministic_malformed():
    t = turn_item("w")
    wrong = Adversary(rules=[Rule(mode="wrong_patches", match=Match(kind="workflow"), patches=("zz",))])
    assert list(wrong.turn(t, turn_response(t))[0].message.version.patches) == ["zz"]
    none = Adversary(rules=[Rule(mode="wrong_patches", match=Match(kind="workflow"))])
    assert not none.turn(t, turn_response(t))[0].message.HasField("version")
    nd = Adversary(rules=[Rule(mode="nondeterministic", match=Match(kind="workflow"))])
    a = nd.turn(turn_item("a"), turn_response(turn_item("a")))[0].message.actions[0].scheduleTask.name
    b = nd.turn(turn_item("b"), turn_response(turn_item("b")))[0].message.actions[0].scheduleTask.name
    assert a != b and a.startswith("echo-")
    bad = Adversary(rules=[Rule(mode="malformed_action", match=Match(kind="workflow"))])
    actions = bad.turn(t, turn_response(t))[0].message.actions
    assert actions[-1].WhichOneof("workflowActionType") is None


def test_nth_and_matching_are_per_rule():
    adv = Adversary(rules=[Rule(mode="disconnect_after_dispatch", match=Match(kind="activity", task_id=2, nth=2))])
    assert not adv.disconnect_after(activity_item("a", task_id=2))
    assert not adv.disconnect_after(activity_item("b", task_id=1))
    assert adv.disconnect_after(activity_item("c", task_id=2))
    assert not adv.disconnect_after(activity_item("d", task_id=2))
    assert adv.disconnect_after(activity_item("c", task_id=2))  # decided once per work item


def test_rules_are_validated_all_at_once():
    with pytest.raises(AdversaryError) as err:
        parse_rules([{"mode": "teleport"}, {"mode": "zombie", "match": {"kind": "workflow"}}, 5])
    text = str(err.value)
    assert "teleport" in text and "does not apply to workflow" in text and "[2]" in text


BUNDLE = parse_bundle({"programs": {
    "one": {"steps": [{"call_activity": {"name": "echo", "input": 1}, "as": "r"}, {"return": "${r}"}]},
    "patched": {"steps": [{"if_patched": {"patch": "p1", "then": [{"wait_event": "go"}]}}, {"return": "ok"}]},
}})


def run_with(rules, program: str, *, events=(), wait_status=None, lease=None):
    srv = SidecarServer.start(port=0, activity_lease=lease)
    worker = Worker(bundle=BUNDLE, options=WorkerOptions(sidecar=srv.address), adversary=Adversary(rules=parse_rules(rules)))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    channel = grpc.insecure_channel(srv.address)
    client = TaskHubClient(channel)
    iid = f"{program}-{uuid.uuid4().hex[:6]}"
    try:
        client.call("StartInstance", pb.CreateInstanceRequest(instanceId=iid, name=program), timeout=20)
        for name in events:
            client.call("RaiseEvent", pb.RaiseEventRequest(instanceId=iid, name=name), timeout=5)
        deadline = time.monotonic() + 20
        while True:
            st = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid)).workflowState.workflowStatus
            if st == (wait_status or pb.ORCHESTRATION_STATUS_COMPLETED) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        hist = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid)).events
        return st, [event_kind(e) for e in hist], srv.engine.counters
    finally:
        worker.stop()
        channel.close()
        srv.stop()
        thread.join(10)


def test_disconnect_after_dispatch_gets_the_activity_redelivered():
    st, kinds, counters = run_with([{"mode": "disconnect_after_dispatch", "match": {"kind": "activity", "nth": 1}}],
                                   "one")
    assert st == pb.ORCHESTRATION_STATUS_COMPLETED and kinds.count("TaskCompleted") == 1
    assert counters.redispatched_activities >= 1


def test_crash_after_activity_runs_it_twice_but_history_holds_one_result():
    st, kinds, counters = run_with([{"mode": "crash_after_activity", "match": {"nth": 1}}], "one")
    assert st == pb.ORCHESTRATION_STATUS_COMPLETED and kinds.count("TaskCompleted") == 1
    assert counters.redispatched_activities >= 1


def test_zombie_against_the_engine_is_rejected():
    rules = [{"mode": "disconnect_after_dispatch", "match": {"kind": "activity", "nth": 1}},
             {"mode": "zombie", "match": {"kind": "activity"}}]
    st, kinds, counters = run_with(rules, "one", lease=0.5)
    assert st == pb.ORCHESTRATION_STATUS_COMPLETED and kinds.count("TaskCompleted") == 1


def test_wrong_patches_stall_the_instance():
    rules = [{"mode": "wrong_patches", "match": {"kind": "workflow", "nth": 2}}]
    st, kinds, _ = run_with(rules, "patched", events=["go"], wait_status=pb.ORCHESTRATION_STATUS_STALLED)
    assert st == pb.ORCHESTRATION_STATUS_STALLED and kinds[-1] == "ExecutionStalled"


def test_malformed_action_is_redelivered_until_a_good_answer():
    st, kinds, counters = run_with([{"mode": "malformed_action", "match": {"nth": 1}}], "one")
    assert st == pb.ORCHESTRATION_STATUS_COMPLETED and counters.abandoned_turns >= 1


def test_complete_twice_applies_once():
    st, kinds, counters = run_with([{"mode": "complete_twice"}], "one")
    assert st == pb.ORCHESTRATION_STATUS_COMPLETED and kinds.count("TaskCompleted") == 1
    assert counters.unknown_activity + counters.unknown_turn >= 1
