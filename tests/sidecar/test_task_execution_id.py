"""ActivityRequest.taskExecutionId: the spec's (a fresh id per dispatch) and the engines' (pass-through).

The spec (seed 000, "Task Execution ID") has the sidecar generate the id when it dispatches an
activity, different on every engine retry (a redelivery after a broken stream, a lease), unlike
task_id; durabletask-go and daprd pass the SDK's ScheduleTask id through. `EngineConfig.task_execution_id`
selects one; the completion records the id of the attempt it answers.
"""

from __future__ import annotations

import pytest

from fake_sidecar.engine import CompletionOutcome, Engine, EngineConfig, TaskExecutionIdMode, VirtualClock
from fake_sidecar.engine.store import MemoryStore
from taskhub_wire import pb


def _engine(mode: TaskExecutionIdMode) -> Engine:
    return Engine(store=MemoryStore(), clock=VirtualClock(), config=EngineConfig(task_execution_id=mode))


def _schedule_answer(item: pb.WorkItem) -> pb.WorkflowResponse:
    resp = pb.WorkflowResponse(instanceId=item.workflowRequest.instanceId, completionToken=item.completionToken)
    a = resp.actions.add(id=1)
    a.scheduleTask.name = "A"
    a.scheduleTask.input.value = "1"
    a.scheduleTask.taskExecutionId = "sdk-id"
    return resp


def _two_dispatches(engine: Engine) -> tuple[pb.WorkItem, pb.WorkItem]:
    """Schedule one activity, take it on a stream that then breaks, and take its redelivery."""
    engine.start_instance(instance_id="w", name="W", input="1")
    sid = engine.open_stream()
    turn = engine.take(sid, timeout=5)
    assert turn is not None and turn.HasField("workflowRequest")
    assert engine.complete_turn(_schedule_answer(turn)) is CompletionOutcome.APPLIED
    first = engine.take(sid, timeout=5)
    assert first is not None and first.HasField("activityRequest")
    engine.close_stream(sid)
    again = engine.take(engine.open_stream(), timeout=5)
    assert again is not None and again.HasField("activityRequest")
    return first, again


def _completion(engine: Engine, item: pb.WorkItem) -> pb.HistoryEvent:
    resp = pb.ActivityResponse(instanceId="w", taskId=item.activityRequest.taskId, completionToken=item.completionToken)
    resp.result.value = "2"
    assert engine.complete_activity(resp) is CompletionOutcome.APPLIED
    inst = engine.table.get("w")  # the inbox, as tests/sidecar reads the engine's state
    return next(e.event for e in inst.inbox if e.event.HasField("taskCompleted"))


def test_spec_mode_makes_a_fresh_id_per_dispatch_and_records_it():
    engine = _engine(TaskExecutionIdMode.SPEC)
    try:
        first, again = _two_dispatches(engine)
        a, b = first.activityRequest.taskExecutionId, again.activityRequest.taskExecutionId
        assert a and b and a != b, "every dispatch gets its own id"
        assert "sdk-id" not in (a, b), "the id is the sidecar's, not the SDK's"
        assert first.activityRequest.taskId == again.activityRequest.taskId == 1, "task_id stays"
        done = _completion(engine, again)
        assert done.taskCompleted.taskExecutionId == b, "the completion records the attempt it answers"
        scheduled = next(e for e in engine.history("w") if e.HasField("taskScheduled"))
        assert scheduled.taskScheduled.taskExecutionId == "sdk-id", "TaskScheduled keeps what the SDK sent"
    finally:
        engine.close()


def test_passthrough_mode_sends_the_sdk_id_on_every_dispatch():
    engine = _engine(TaskExecutionIdMode.PASSTHROUGH)
    try:
        first, again = _two_dispatches(engine)
        assert first.activityRequest.taskExecutionId == again.activityRequest.taskExecutionId == "sdk-id"
        assert _completion(engine, again).taskCompleted.taskExecutionId == "sdk-id"
    finally:
        engine.close()


def test_a_late_answer_of_the_first_attempt_is_refused_in_spec_mode():
    engine = _engine(TaskExecutionIdMode.SPEC)
    try:
        first, again = _two_dispatches(engine)
        late = pb.ActivityResponse(instanceId="w", taskId=1, completionToken=first.completionToken)
        late.result.value = "zombie"
        assert engine.complete_activity(late) is CompletionOutcome.STALE
        assert _completion(engine, again).taskCompleted.taskExecutionId == again.activityRequest.taskExecutionId
    finally:
        engine.close()


@pytest.mark.parametrize("text", ["spec", "passthrough"])
def test_the_mode_is_a_server_and_cli_option(text):
    from fake_sidecar.__main__ import build_parser
    from fake_sidecar.server import SidecarServer

    assert build_parser().parse_args(["--task-execution-id", text]).task_execution_id == text
    server = SidecarServer.start(port=0, task_execution_id=text)
    try:
        assert server.engine.config.task_execution_id is TaskExecutionIdMode(text)
    finally:
        server.stop(grace=0)


def test_an_unknown_mode_is_a_clear_error():
    from fake_sidecar.server import SidecarServer

    with pytest.raises(ValueError, match="unknown task_execution_id mode 'uuid'; known: spec, passthrough"):
        SidecarServer.start(port=0, task_execution_id="uuid")
