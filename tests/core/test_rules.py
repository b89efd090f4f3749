"""The pure core's rules, each through the instance machine the sidecar, the simulator and the fuzzer run."""

from __future__ import annotations

import pytest

from taskhub_core import machine
from taskhub_core.actions import child_instance_id
from taskhub_core.history import Operation, resolution_key
from taskhub_core.state import InstanceState
from taskhub_core.timestamps import NEVER_NS, NS_PER_S, ts
from taskhub_core.turn import TurnKind, decide_turn
from taskhub_wire import pb

T0 = 1_767_225_600 * NS_PER_S


def started(name: str = "wf") -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(T0))
    ev.executionStarted.name = name
    ev.executionStarted.workflowInstance.instanceId = "i1"
    return ev


def workflow_started(now: int) -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(now))
    ev.workflowStarted.SetInParent()
    return ev


def raised(name: str) -> pb.HistoryEvent:
    ev = pb.HistoryEvent(eventId=-1, timestamp=ts(T0))
    ev.eventRaised.name = name
    return ev


def answer(*actions: pb.WorkflowAction, patches: tuple[str, ...] = ()) -> pb.WorkflowResponse:
    resp = pb.WorkflowResponse(instanceId="i1")
    resp.actions.extend(actions)
    if patches:
        resp.version.patches.extend(patches)
    return resp


def timeout_timer(action_id: int, event: str, fire_ns: int) -> pb.WorkflowAction:
    a = pb.WorkflowAction(id=action_id)
    a.createTimer.fireAt.CopyFrom(ts(fire_ns))
    a.createTimer.externalEvent.name = event
    return a


def turn(state: InstanceState, resp: pb.WorkflowResponse, now: int, *, restart: int | None = None):
    """Take everything visible at `now` and answer it with `resp`."""
    visible = [e for e in state.inbox if e.visible_at <= now]
    new = (workflow_started(now),) + tuple(e.event for e in visible)
    return machine.apply(state, machine.Answer(new_events=new, response=resp, consumed=frozenset(e.seq for e in visible),
                                               decided_ns=now, now_ns=now, restart_ns=restart,
                                               next_execution_id="gen-2"))


def waiting(fire_ns: int) -> InstanceState:
    """An instance waiting for event 'go' with a timeout timer due at `fire_ns`."""
    state = machine.start_state(iid="i1", name="wf", start=started())
    state, _ = turn(state, answer(timeout_timer(0, "go", fire_ns)), T0)
    return state


def test_a_raised_event_cancels_its_pending_timeout_timer_case_insensitively() -> None:
    state = waiting(T0 + 10 * NS_PER_S)
    state, _ = machine.apply(state, machine.Arrive(event=raised("GO")))
    state, effects = turn(state, answer(), T0 + NS_PER_S)
    assert [type(e) for e in effects if isinstance(e, machine.TimerCancelled)] == [machine.TimerCancelled]
    assert not any(e.event.HasField("timerFired") for e in state.inbox)


def test_a_timeout_timer_already_due_is_not_cancelled() -> None:
    """R6.3: a due timer has fired; the event and the TimerFired both reach the workflow."""
    state = waiting(T0 + NS_PER_S)
    state, _ = machine.apply(state, machine.Arrive(event=raised("go")))
    state, effects = turn(state, answer(), T0 + 5 * NS_PER_S)
    assert not any(isinstance(e, machine.TimerCancelled) for e in effects)


def test_a_late_timeout_engine_keeps_the_timer_and_delivers_it_when_due() -> None:
    """R6.3 as durabletask-go's sidecar applies it (cancel_timeouts=False): the event wins, nothing is
    cancelled, and the timeout timer's TimerFired comes due at its fireAt, after the event's turn."""
    state = waiting(T0 + 10 * NS_PER_S)
    state, _ = machine.apply(state, machine.Arrive(event=raised("go")))
    visible = [e for e in state.inbox if e.visible_at <= T0 + NS_PER_S]
    state, effects = machine.apply(state, machine.Answer(
        new_events=(workflow_started(T0 + NS_PER_S),) + tuple(e.event for e in visible), response=answer(),
        consumed=frozenset(e.seq for e in visible), decided_ns=T0 + NS_PER_S, now_ns=T0 + NS_PER_S,
        cancel_timeouts=False))
    assert not any(isinstance(e, machine.TimerCancelled) for e in effects)
    kept = [e for e in state.inbox if e.event.HasField("timerFired")]
    assert [(e.event.timerFired.timerId, e.visible_at) for e in kept] == [(0, T0 + 10 * NS_PER_S)]
    state, _ = turn(state, answer(), T0 + 10 * NS_PER_S)  # the late TimerFired's turn
    assert [e.timerFired.timerId for e in state.history if e.HasField("timerFired")] == [0]


def test_the_sentinel_timer_never_comes_due() -> None:
    state = waiting(253402300799 * NS_PER_S)
    assert [e.visible_at for e in state.inbox] == [NEVER_NS]


def test_continue_as_new_carries_events_first_and_forgets_timers() -> None:
    state = waiting(T0 + 10 * NS_PER_S)
    state, _ = machine.apply(state, machine.Arrive(event=raised("later"), visible_at=T0 + 99 * NS_PER_S))
    can = pb.WorkflowAction(id=1)
    can.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
    can.completeWorkflow.result.value = "2"
    can.completeWorkflow.carryoverEvents.append(raised("kept"))
    state, effects = turn(state, answer(can), T0 + NS_PER_S, restart=T0 + 2 * NS_PER_S)
    assert state.generation == 1 and state.history == () and state.facts.continuing
    kinds = [(e.event.WhichOneof("eventType"), e.visible_at) for e in state.inbox]
    assert kinds == [("executionStarted", 0), ("eventRaised", 0), ("eventRaised", T0 + 99 * NS_PER_S)]
    start = state.inbox[0].event.executionStarted
    assert (start.input.value, start.workflowInstance.executionId.value) == ("2", "gen-2")
    assert any(isinstance(e, machine.GenerationStarted) for e in effects)


def test_a_stale_action_id_abandons_and_a_patch_mismatch_stalls() -> None:
    state = waiting(T0 + 10 * NS_PER_S)
    stale = pb.WorkflowAction(id=0)
    stale.scheduleTask.name = "echo"
    assert decide_turn(state, [workflow_started(T0)], answer(stale), now_ns=T0).kind is TurnKind.ABANDON
    patched = machine.start_state(iid="i1", name="wf", start=started())
    patched, _ = turn(patched, answer(patches=("p1", "p2")), T0)
    assert patched.facts.patches == ("p1", "p2")
    d = decide_turn(patched, [workflow_started(T0)], answer(patches=("p2",)), now_ns=T0)
    assert d.kind is TurnKind.STALL and d.stall is not None and d.stall[0] == pb.PATCH_MISMATCH


def test_a_completion_ends_the_instance_and_drops_its_timers() -> None:
    state = waiting(T0 + 10 * NS_PER_S)
    done = pb.WorkflowAction(id=1)
    done.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_COMPLETED
    later = pb.WorkflowAction(id=2)
    later.scheduleTask.name = "never"
    state, effects = turn(state, answer(done, later), T0 + NS_PER_S)
    assert state.facts.terminal and state.inbox == ()
    assert not any(isinstance(e, machine.ActivityScheduled) for e in effects)  # R3.1: the first completion wins


def test_a_spawn_before_the_completion_of_one_answer_is_applied() -> None:
    """R3.12: the turn that spawns a detached workflow and completes (a `spawn` then `return`) keeps the spawn."""
    state = machine.start_state(iid="i1", name="wf", start=started())
    spawn = pb.WorkflowAction(id=1)
    spawn.createDetachedWorkflow.name, spawn.createDetachedWorkflow.instanceId = "other", "i1-0"
    done = pb.WorkflowAction(id=2)
    done.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_COMPLETED
    state, effects = turn(state, answer(spawn, done), T0)
    assert state.facts.terminal
    (child,) = [e.child for e in effects if isinstance(e, machine.ChildStarted)]
    assert (child.iid, child.detached, child.start.executionStarted.HasField("parentInstance")) == ("i1-0", True, False)
    assert [e.eventId for e in state.history if e.HasField("detachedWorkflowInstanceCreated")] == [1]


@pytest.mark.parametrize(("action_id", "suffix"), [(0, "0000"), (5, "0005"), (0x1_0003, "0003"), (-1, "ffff")])
def test_child_ids(action_id: int, suffix: str) -> None:
    assert child_instance_id("p", action_id) == f"p:{suffix}"


def test_resolution_keys_are_typed_and_equal_to_their_plain_form() -> None:
    ev = pb.HistoryEvent(eventId=-1)
    ev.taskFailed.taskScheduledId = 3
    key = resolution_key(ev)
    assert key == (Operation.TASK, 3) == ("task", 3)
    assert resolution_key(raised("x")) is None


def test_a_command_of_another_kind_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="not a command of the instance machine"):
        machine.apply(InstanceState(iid="i1", name="wf"), "raise")  # type: ignore[arg-type]
