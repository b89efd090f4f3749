"""Vectors in a worker's dialect (conformance/dialects/vectors.py) and the engine view of answers."""

from __future__ import annotations

from conformance.dialects.compare import engine_view
from conformance.dialects.vectors import in_dialect
from conformance.scenario.model import Vector
from conformance.scenario.wire import parse_event

DX = ["ids_from_one", "event_wait_timer", "timer_origins", "task_execution_id", "teid_uuid5"]
GO = ["event_wait_timer", "timer_origins", "task_execution_id"]
JAVA = ["task_execution_id"]
SENTINEL = "9999-12-31T23:59:59.999999999Z"


def _vector(past, new, actions) -> Vector:
    events = [parse_event(e, index=i) for i, e in enumerate(past + new)]
    return Vector(instance_id="p", past=tuple(events[:len(past)]), new=tuple(events[len(past):]), actions=tuple(actions))


CHILD = _vector(
    [{"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}},
     {"TaskScheduled": {"name": "echo"}, "eventId": 1}],
    [{"WorkflowStarted": {}}, {"TaskCompleted": {"taskScheduledId": 1}}],
    [{"CreateChildWorkflow": {"id": 2, "name": "sub", "instanceId": "p:0002"}}])


def test_the_reference_dialect_is_sent_as_written():
    turn = in_dialect(CHILD, capabilities=DX)
    assert turn.past == CHILD.past and turn.expected == CHILD.actions and turn.note == ""


def test_ids_from_zero_are_shifted_out_and_back():
    turn = in_dialect(CHILD, capabilities=GO)
    assert [e.eventId for e in turn.past if e.HasField("taskScheduled")] == [0]
    assert [e.taskCompleted.taskScheduledId for e in turn.new if e.HasField("taskCompleted")] == [0]
    answer = {"actions": [{"CreateChildWorkflow": {"id": 1, "name": "sub", "instanceId": "p:0001"}}]}
    assert turn.to_reference(answer)["actions"] == [{"CreateChildWorkflow": {"id": 2, "name": "sub",
                                                                            "instanceId": "p:0002"}}]
    assert "ids from 0" in turn.note


def test_wait_timers_are_stripped_and_ids_ranked():
    vec = _vector(
        [{"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}},
         {"TimerCreated": {"fireAt": SENTINEL, "externalEvent": {"name": "go"}}, "eventId": 1}],
        [{"WorkflowStarted": {}}, {"EventRaised": {"name": "go"}}],
        [{"ScheduleTask": {"id": 2, "name": "echo"}},
         {"CreateTimer": {"id": 3, "fireAt": SENTINEL, "externalEvent": {"name": "again"}}},
         {"ScheduleTask": {"id": 4, "name": "echo"}}])
    turn = in_dialect(vec, capabilities=JAVA)
    assert not any(e.HasField("timerCreated") for e in turn.past)
    assert turn.expected == ({"ScheduleTask": {"id": 1, "name": "echo"}}, {"ScheduleTask": {"id": 2, "name": "echo"}})
    # Java numbers from 0 and makes no wait timer: ids 0 and 1 rank as 1 and 2.
    got = turn.to_reference({"actions": [{"ScheduleTask": {"id": 0, "name": "echo"}},
                                         {"ScheduleTask": {"id": 1, "name": "echo"}}]})
    assert got["actions"] == list(turn.expected)
    # A gap the SDK leaves is still seen: ids 0 and 2 rank as 1 and 2 too, but a wrong order is not.
    bad = turn.to_reference({"actions": [{"ScheduleTask": {"id": 1, "name": "echo"}},
                                         {"ScheduleTask": {"id": 0, "name": "echo"}}]})
    assert bad["actions"] != list(turn.expected)


def test_origins_and_execution_ids_are_loosened_only_without_the_capability():
    vec = _vector([], [{"WorkflowStarted": {}}, {"ExecutionStarted": {"name": "main"}}],
                  [{"ScheduleTask": {"id": 1, "name": "echo", "taskExecutionId": "abc"}},
                   {"CreateTimer": {"id": 2, "fireAt": "2026-01-01T00:00:05Z", "createTimer": {}}}])
    assert in_dialect(vec, capabilities=DX).expected == vec.actions
    java = in_dialect(vec, capabilities=JAVA).expected
    assert java[0]["ScheduleTask"]["taskExecutionId"] == "re:.+"
    assert "createTimer" not in java[1]["CreateTimer"]
    go = in_dialect(vec, capabilities=GO).expected
    assert go[1]["CreateTimer"]["createTimer"] == {} and go[0]["ScheduleTask"]["taskExecutionId"] == "re:.+"


def test_engine_view():
    actions = [{"CreateChildWorkflow": {"id": 26, "name": "sub"}},
               {"CompleteWorkflow": {"id": 27, "workflowStatus": "ORCHESTRATION_STATUS_FAILED"}},
               {"ScheduleTask": {"id": 28, "name": "echo"}},
               {"CompleteWorkflow": {"id": 29, "workflowStatus": "ORCHESTRATION_STATUS_FAILED"}}]
    assert engine_view(actions, "p", wire=False) == [
        {"CreateChildWorkflow": {"id": 26, "name": "sub", "instanceId": "p:001a"}},
        actions[1], actions[2]]  # a ScheduleTask after a FAILED completion is still applied (R3.1)
    terminated = [{"id": 3, "completeWorkflow": {"workflowStatus": "ORCHESTRATION_STATUS_TERMINATED"}},
                  {"id": 4, "scheduleTask": {"name": "echo"}}]
    assert engine_view(terminated, "p", wire=True) == terminated[:1]


def test_engine_view_drops_a_moot_wait_timer():
    sentinel = {"CreateTimer": {"id": 1, "fireAt": "9999-12-31T23:59:59.999999999Z", "externalEvent": {"name": "go"}}}
    done = {"CompleteWorkflow": {"id": 2, "workflowStatus": "ORCHESTRATION_STATUS_COMPLETED"}}
    assert engine_view([sentinel, done], "p", wire=False) == [done]  # the instance ends: it never fires
    assert engine_view([sentinel], "p", wire=False) == [sentinel]  # still waiting: the timer stands
    real = {"CreateTimer": {"id": 1, "fireAt": "2026-01-01T00:00:00Z", "createTimer": {}}}
    assert engine_view([real, done], "p", wire=False) == [real, done]  # a durable timer is the program's
    timed_wait = {"CreateTimer": {"id": 1, "fireAt": "2026-01-01T00:01:00Z", "externalEvent": {"name": "go"}}}
    assert engine_view([timed_wait, done], "p", wire=False) == [done]
    wire = [{"id": 1, "createTimer": {"fireAt": "9999-12-31T23:59:59.999999999Z"}},
            {"id": 2, "completeWorkflow": {"workflowStatus": "ORCHESTRATION_STATUS_FAILED"}}]
    assert engine_view(wire, "p", wire=True) == wire[1:]
