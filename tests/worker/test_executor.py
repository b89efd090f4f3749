"""The pure replay executor on hand-built histories: exactly the actions dapr-ext-workflow 1.18.3 answers.

Each test builds `past` and `new` with tests/worker/histories.py and compares whole WorkflowActions
(ids, names, JSON inputs, fireAt, timer origins, failure details). The programs are defined here,
not taken from the example bundle, so that each test pins one behaviour. Expectations were checked
against the real SDK's executor (sdk-wire-behaviour.md §3, patching-and-stall.md §2-3).
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from taskhub_programs import parse_bundle
from fake_worker.replay import TurnResult, execute
from taskhub_wire import pb
from tests.worker.histories import (
    CONTINUED_AS_NEW, NONE, OPTIONAL_FIRE_AT, TERMINATED, carried_event, child_completed, child_created, child_failed,
    complete, create_child, create_timer, event_raised, execution_id, execution_stalled, execution_started, failed,
    optional_timer, optional_timer_created, resumed, schedule, start, suspended, task_completed, task_failed,
    task_scheduled, terminated, timer_created, timer_fired, version_not_available, workflow_started,
)

BUNDLE = parse_bundle(yaml.safe_load(textwrap.dedent("""
    programs:
      act:
        steps:
          - call_activity: {name: echo, input: "${input}"}
            as: r
          - return: "${r}"
      act_then_act:
        steps:
          - all:
              - call_activity: {name: echo, input: a}
              - call_activity: {name: echo, input: b}
          - call_activity: {name: echo, input: c}
      act_retry:
        steps:
          - call_activity:
              name: fail
              input: {times: 9}
              retry: {max_attempts: 4, first_delay: 1s, backoff: 2, max_delay: 3s}
      act_retry_timeout:
        steps:
          - call_activity:
              name: fail
              input: {times: 9}
              retry: {max_attempts: 9, first_delay: 1s, backoff: 2, timeout: 3s}
      child:
        steps:
          - call_child: {workflow: act, input: "${input}"}
            as: r
          - return: "${r}"
      child_named:
        steps:
          - call_child: {workflow: act, input: 1, instance_id: "kid-${input}"}
      child_late:
        steps:
          - all:
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
              - timer: 1s
          - call_child: {workflow: act}
      child_retry:
        steps:
          - call_child: {workflow: act, retry: {max_attempts: 2, first_delay: 500ms}}
      timer:
        steps:
          - timer: 1.5s
          - return: done
      wait:
        steps:
          - wait_event: Approve
            as: v
          - return: "${v}"
      wait_then_act:
        steps:
          - wait_event: go
          - call_activity: {name: echo, input: 5}
            as: r
          - return: "${r}"
      wait_and_acts:
        steps:
          - all:
              - wait_event: go
              - call_activity: {name: echo, input: a}
              - call_activity: {name: echo, input: b}
      wait_default:
        steps:
          - wait_event: {name: go, timeout: 10s, default: late}
            as: v
          - return: "${v}"
      wait_strict:
        steps:
          - wait_event: {name: go, timeout: 10s}
            as: v
          - return: "${v}"
      wait_zero:
        steps:
          - wait_event: {name: go, timeout: 0, default: zero}
            as: v
          - return: "${v}"
      fan:
        steps:
          - all:
              - call_activity: {name: echo, input: 1}
              - call_activity: {name: echo, input: 2}
              - timer: 1s
            as: r
          - return: "${r}"
      race:
        steps:
          - any:
              - wait_event: go
              - timer: 5s
            as: r
          - return: "${r}"
      branch:
        steps:
          - if:
              cond: {$lt: ["${input}", 3]}
              then: [{return: small}]
              else: [{return: big}]
      calc:
        steps:
          - set: {var: xs, value: [1, 2, 3]}
          - set: {var: m, value: {k: v}}
          - return:
              add: {$add: [1, 2]}
              add_text: {$add: ["a", 1]}
              sub: {$sub: [5, 2]}
              lt: {$lt: [1, 2]}
              le: {$le: [2, 2]}
              eq: {$eq: ["${m.k}", v]}
              not: {$not: "${xs}"}
              len: {$len: "${xs}"}
              sum: {$sum: "${xs}"}
              concat: {$concat: ["x", 1, "${xs}"]}
              index: "${xs.1}"
              last: "${xs.-1}"
              text: "n=${xs} k=${m.k}"
      bad_expr:
        steps:
          - return: "${nope}"
      status:
        steps:
          - set_status: {stage: 1}
          - timer: 1s
          - set_status: two
          - timer: 1s
      can:
        steps:
          - continue_as_new: {input: {$add: ["${input}", 1]}, carry_events: true}
      can_plain:
        steps:
          - continue_as_new: {input: "${input}"}
      empty:
        steps:
          - return: null
      boom:
        steps:
          - fail: {message: "bad ${input}", type: BusinessError}
      boom_text:
        steps:
          - fail: plain failure
      patched:
        steps:
          - if_patched:
              patch: p1
              then: [{call_activity: {name: new_act}}]
              else: [{call_activity: {name: old_act}}]
          - return: ok
      patched_twice:
        steps:
          - if_patched: {patch: p1}
          - if_patched: {patch: p1}
          - if_patched: {patch: p2}
      versioned:
        versions:
          v1:
            steps: [{call_activity: {name: echo, input: v1}}]
          v2:
            steps: [{call_activity: {name: echo, input: v2}}]
        default: v2
    """)))

IID = "wf-1"


def run(past: list[pb.HistoryEvent], new: list[pb.HistoryEvent], *, bundle=BUNDLE, iid: str = IID) -> TurnResult:
    return execute(bundle, instance_id=iid, past=past, new=new)


def actions(past: list[pb.HistoryEvent], new: list[pb.HistoryEvent], **kw) -> list[pb.WorkflowAction]:
    return list(run(past, new, **kw).actions)


def eid(t: float, counter: int, iid: str = IID) -> str:
    return execution_id(iid, t, counter)


# ---------------------------------------------------------------------------- call_activity


def test_activity_first_turn_schedules_id_1_with_json_input_and_uuid5_execution_id() -> None:
    assert actions([], start("act", "x", t=100)) == [schedule(1, "echo", "x", execution_id=eid(100, 0))]


def test_execution_id_is_uuid5_for_any_instance_id() -> None:
    iid = "wf-ü✓/1"
    assert actions([], start("act", 1, t=3.000001), iid=iid) == [
        schedule(1, "echo", 1, execution_id=eid(3.000001, 0, iid))]


def test_activity_without_input_has_no_input_field() -> None:
    [a] = actions([], start("act", t=0))
    assert not a.scheduleTask.HasField("input")


def test_activity_result_completes_with_next_id() -> None:
    past = start("act", {"k": [1, 2]}) + [task_scheduled(1, "echo", {"k": [1, 2]})]
    assert actions(past, [workflow_started(5), task_completed(1, {"k": [1, 2]})]) == [complete(2, {"k": [1, 2]})]


def test_execution_id_counter_runs_over_the_whole_execution_with_each_turn_time() -> None:
    first = actions([], start("act_then_act", t=10))
    assert first == [schedule(1, "echo", "a", execution_id=eid(10, 0)),
                     schedule(2, "echo", "b", execution_id=eid(10, 1))]
    past = start("act_then_act", t=10) + [task_scheduled(1, "echo", "a"), task_scheduled(2, "echo", "b")]
    new = [workflow_started(20.25), task_completed(1, "a"), task_completed(2, "b")]
    assert actions(past, new) == [schedule(3, "echo", "c", execution_id=eid(20.25, 2))]


def test_activity_failure_without_retry_fails_the_workflow() -> None:
    past = start("act", "x") + [task_scheduled(1, "echo")]
    assert actions(past, [workflow_started(5), task_failed(1, "bad")]) == [
        failed(2, "TaskFailedError", "wf-1: Activity task #1 failed: bad")]


def test_retry_timers_follow_first_delay_backoff_and_max_delay_then_fail() -> None:
    exec_id = eid(0, 0)
    past = start("act_retry")
    assert actions([], past) == [schedule(1, "fail", {"times": 9}, execution_id=exec_id)]
    past = past + [task_scheduled(1, "fail", {"times": 9}, execution_id=exec_id)]
    delays = {2: 1.0, 4: 2.0, 6: 3.0}  # 1s, 1s*2, min(1s*4, 3s)
    t = 0.0
    for timer_id, delay in delays.items():
        t += 10
        new = [workflow_started(t), task_failed(timer_id - 1)]
        assert actions(past, new) == [create_timer(timer_id, t + delay, origin="activityRetry", origin_value=exec_id)]
        past = past + new + [timer_created(timer_id, t + delay, origin="activityRetry", origin_value=exec_id)]
        new = [workflow_started(t + delay), timer_fired(timer_id, t + delay)]
        # The retry reuses the input and the task execution id, with a fresh action id.
        assert actions(past, new) == [schedule(timer_id + 1, "fail", {"times": 9}, execution_id=exec_id)]
        past = past + new + [task_scheduled(timer_id + 1, "fail", {"times": 9}, execution_id=exec_id)]
    # Attempt 4 of 4 fails: no more retries.
    assert actions(past, [workflow_started(100), task_failed(7, "still bad")]) == [
        failed(8, "TaskFailedError", "wf-1: Activity task #7 failed: still bad")]


def test_retry_timeout_stops_once_the_delays_reach_it() -> None:
    # Delays 1s, 2s: after attempt 1 the sum is 1s (under 3s: retry), after attempt 2 it is 3s (no more),
    # whatever the turns' times, as dapr-ext-workflow 1.18.3 counts it (task.py compute_next_delay).
    exec_id = eid(0, 0)
    past = start("act_retry_timeout") + [task_scheduled(1, "fail", {"times": 9}, execution_id=exec_id)]
    new = [workflow_started(100), task_failed(1)]
    assert actions(past, new) == [create_timer(2, 101, origin="activityRetry", origin_value=exec_id)]
    past = past + new + [timer_created(2, 101, origin="activityRetry", origin_value=exec_id),
                         workflow_started(101), timer_fired(2, 101),
                         task_scheduled(3, "fail", {"times": 9}, execution_id=exec_id)]
    assert actions(past, [workflow_started(102), task_failed(3, "late")]) == [
        failed(4, "TaskFailedError", "wf-1: Activity task #3 failed: late")]


def test_retry_stops_on_error_type_NonRetryableError() -> None:
    past = start("act_retry") + [task_scheduled(1, "fail")]
    new = [workflow_started(5), task_failed(1, "no", error_type="NonRetryableError")]
    assert actions(past, new) == [failed(2, "TaskFailedError", "wf-1: Activity task #1 failed: no")]


def test_retry_ignores_the_isNonRetriable_flag_like_dapr_ext_workflow() -> None:
    past = start("act_retry") + [task_scheduled(1, "fail")]
    new = [workflow_started(5), task_failed(1, "flagged", non_retriable=True)]
    assert actions(past, new) == [create_timer(2, 6, origin="activityRetry", origin_value=eid(0, 0))]


# ---------------------------------------------------------------------------- call_child


def test_child_gets_default_instance_id_iid_colon_hex_action_id() -> None:
    assert actions([], start("child", "x")) == [create_child(1, "act", "wf-1:0001", "x")]


def test_child_default_instance_id_is_hex() -> None:
    past = start("child_late") + [timer_created(i, 1) for i in range(1, 11)]
    new = [workflow_started(1)] + [timer_fired(i, 1) for i in range(1, 11)]
    assert actions(past, new) == [create_child(11, "act", "wf-1:000b")]


def test_child_instance_id_expression() -> None:
    assert actions([], start("child_named", "7")) == [create_child(1, "act", "kid-7", 1)]


def test_child_completion_and_failure() -> None:
    past = start("child", "x") + [child_created(1, "act", "wf-1:0001", "x")]
    assert actions(past, [workflow_started(3), child_completed(1, "x!")]) == [complete(2, "x!")]
    assert actions(past, [workflow_started(3), child_failed(1, "kid broke")]) == [
        failed(2, "TaskFailedError", "Sub-orchestration task #1 failed: kid broke")]


def test_child_retry_timer_has_child_origin_and_recreates_the_same_instance() -> None:
    past = start("child_retry") + [child_created(1, "act", "wf-1:0001")]
    new = [workflow_started(4), child_failed(1)]
    assert actions(past, new) == [create_timer(2, 4.5, origin="childWorkflowRetry", origin_value="wf-1:0001")]
    past = past + new + [timer_created(2, 4.5, origin="childWorkflowRetry", origin_value="wf-1:0001")]
    assert actions(past, [workflow_started(4.5), timer_fired(2, 4.5)]) == [create_child(3, "act", "wf-1:0001")]


# ---------------------------------------------------------------------------- timer


def test_timer_fires_at_turn_time_plus_duration_with_createTimer_origin() -> None:
    assert actions([], start("timer", t=100)) == [create_timer(1, 101.5)]
    past = start("timer", t=100) + [timer_created(1, 101.5)]
    assert actions(past, [workflow_started(102), timer_fired(1, 101.5)]) == [complete(2, "done")]


# ---------------------------------------------------------------------------- wait_event


def test_indefinite_wait_reserves_id_1_for_the_optional_9999_timer() -> None:
    assert actions([], start("wait")) == [optional_timer(1, "Approve")]
    assert optional_timer(1, "Approve").createTimer.fireAt == OPTIONAL_FIRE_AT


def test_event_names_match_case_insensitively() -> None:
    past = start("wait") + [optional_timer_created(1, "Approve")]
    assert actions(past, [workflow_started(9), event_raised("APPROVE", {"ok": True})]) == [complete(2, {"ok": True})]


def test_event_raised_before_the_wait_is_buffered_and_no_timer_is_made() -> None:
    new = [workflow_started(0), event_raised("approve", 7), execution_started("wait")]
    assert actions([], new) == [complete(1, 7)]


def test_event_without_payload_gives_null_and_a_null_result_is_left_unset() -> None:
    past = start("wait") + [optional_timer_created(1, "Approve")]
    assert actions(past, [workflow_started(9), event_raised("approve")]) == [complete(2)]


def test_history_without_the_optional_timer_is_replayed_with_ids_shifted_down() -> None:
    # Written by an SDK that did not reserve the optional timer: the activity got id 1.
    past = start("wait_then_act") + [workflow_started(3), event_raised("go"), task_scheduled(1, "echo", 5)]
    assert actions(past, [workflow_started(6), task_completed(1, 5)]) == [complete(2, 5)]


def test_ids_after_a_dropped_optional_timer_shift_down_for_pending_actions_too() -> None:
    past = start("wait_and_acts") + [task_scheduled(1, "echo", "a")]
    assert actions(past, [workflow_started(5)]) == [schedule(2, "echo", "b", execution_id=eid(0, 1))]


def test_optional_timer_recorded_without_origin_still_counts_as_the_optional_timer() -> None:
    past = start("wait") + [timer_created(1, OPTIONAL_FIRE_AT, origin="none")]
    assert actions(past, [workflow_started(5), event_raised("approve", 3)]) == [complete(2, 3)]


def test_wait_with_timeout_uses_an_externalEvent_timer() -> None:
    assert actions([], start("wait_default", t=50)) == [
        create_timer(1, 60, origin="externalEvent", origin_value="go")]


def test_wait_timeout_gives_the_default() -> None:
    past = start("wait_default") + [timer_created(1, 10, origin="externalEvent", origin_value="go")]
    assert actions(past, [workflow_started(10), timer_fired(1, 10)]) == [complete(2, "late")]
    assert actions(past, [workflow_started(4), event_raised("go", "early")]) == [complete(2, "early")]


def test_wait_timeout_without_default_fails_with_TimeoutError() -> None:
    past = start("wait_strict") + [timer_created(1, 10, origin="externalEvent", origin_value="go")]
    assert actions(past, [workflow_started(10), timer_fired(1, 10)]) == [
        failed(2, "TimeoutError", "Timed out after datetime.timedelta(seconds=10) waiting for external event 'go'")]


def test_wait_with_zero_timeout_gives_the_default_at_once_without_a_timer() -> None:
    assert actions([], start("wait_zero")) == [complete(1, "zero")]


# ---------------------------------------------------------------------------- all / any


def test_all_schedules_every_task_then_completes_with_results_in_order() -> None:
    assert actions([], start("fan", t=0)) == [
        schedule(1, "echo", 1, execution_id=eid(0, 0)), schedule(2, "echo", 2, execution_id=eid(0, 1)),
        create_timer(3, 1)]
    past = start("fan") + [task_scheduled(1, "echo", 1), task_scheduled(2, "echo", 2), timer_created(3, 1)]
    new = [workflow_started(2), task_completed(2, 2), timer_fired(3, 1), task_completed(1, 1)]
    assert actions(past, new) == [complete(4, [1, 2, None])]
    assert actions(past, [workflow_started(2), task_completed(2, 2)]) == []


def test_all_fails_fast_on_the_first_failed_task() -> None:
    past = start("fan") + [task_scheduled(1, "echo", 1), task_scheduled(2, "echo", 2), timer_created(3, 1)]
    assert actions(past, [workflow_started(2), task_failed(2, "two")]) == [
        failed(4, "TaskFailedError", "wf-1: Activity task #2 failed: two")]


def test_any_gives_index_and_result_of_the_first_task_to_finish() -> None:
    assert actions([], start("race")) == [optional_timer(1, "go"), create_timer(2, 5)]
    past = start("race") + [optional_timer_created(1, "go"), timer_created(2, 5)]
    assert actions(past, [workflow_started(5), timer_fired(2, 5)]) == [complete(3, {"index": 1, "result": None})]
    assert actions(past, [workflow_started(1), event_raised("go", "x")]) == [complete(3, {"index": 0, "result": "x"})]


# ---------------------------------------------------------------------------- if / set / expressions


@pytest.mark.parametrize(("value", "result"), [(1, "small"), (5, "big")])
def test_if_takes_the_branch_of_its_condition(value: int, result: str) -> None:
    assert actions([], start("branch", value)) == [complete(1, result)]


def test_set_and_every_operator() -> None:
    [a] = actions([], start("calc"))
    assert a == complete(1, {
        "add": 3, "add_text": "a1", "sub": 3, "lt": True, "le": True, "eq": True, "not": False, "len": 3, "sum": 6,
        "concat": "x1[1,2,3]", "index": 2, "last": 3, "text": "n=[1,2,3] k=v"})


def test_unknown_variable_fails_with_ExpressionError() -> None:
    [a] = actions([], start("bad_expr"))
    assert a.completeWorkflow.workflowStatus == pb.ORCHESTRATION_STATUS_FAILED
    assert a.completeWorkflow.failureDetails.errorType == "ExpressionError"
    assert "unknown variable 'nope'" in a.completeWorkflow.failureDetails.errorMessage


# ---------------------------------------------------------------------------- set_status, continue_as_new, return, fail


def test_custom_status_is_the_text_of_values_and_the_string_itself_for_strings() -> None:
    result = run([], start("status"))
    assert result.custom_status == '{"stage":1}'
    past = start("status") + [timer_created(1, 1)]
    result = run(past, [workflow_started(1), timer_fired(1, 1)])
    assert result.custom_status == "two"
    assert list(result.actions) == [create_timer(2, 2)]
    assert result.response(instance_id=IID, completion_token="t").customStatus.value == "two"


def test_no_custom_status_leaves_the_field_unset() -> None:
    result = run([], start("act", "x"))
    assert result.custom_status is None
    assert not result.response(instance_id=IID, completion_token="t").HasField("customStatus")


def test_continue_as_new_carries_unconsumed_events_when_asked() -> None:
    new = [workflow_started(0), event_raised("Foo", 1), event_raised("bar", 0), event_raised("foo", "two"),
           execution_started("can", 1)]
    # Carried as received (grouped by the case-folded name they are matched by): each event's own name
    # and payload, a falsy one (0) included. dapr-ext-workflow case-folds the names and drops the 0.
    assert actions([], new) == [complete(1, 2, status=CONTINUED_AS_NEW, carryover=[
        carried_event("Foo", 1), carried_event("foo", "two"), carried_event("bar", 0)])]


def test_continue_as_new_without_carry_events() -> None:
    new = [workflow_started(0), event_raised("x", 1), execution_started("can_plain", "again")]
    assert actions([], new) == [complete(1, "again", status=CONTINUED_AS_NEW)]


def test_return_null_completes_without_a_result() -> None:
    [a] = actions([], start("empty"))
    assert a == complete(1)
    assert not a.completeWorkflow.HasField("result")


def test_fail_step_fails_with_its_type_and_message() -> None:
    assert actions([], start("boom", "x")) == [failed(1, "BusinessError", "bad x")]
    assert actions([], start("boom_text")) == [failed(1, "ProgramFailure", "plain failure")]


# ---------------------------------------------------------------------------- patches (patching-and-stall.md §2.1)


def test_first_turn_reports_the_patch() -> None:
    result = run([], start("patched"))
    assert result.patches == ("p1",)
    assert list(result.actions) == [schedule(1, "new_act", execution_id=eid(0, 0))]
    assert list(result.response(instance_id=IID, completion_token="t").version.patches) == ["p1"]


@pytest.mark.parametrize(("history_patches", "recorded", "patches", "outcome"), [
    (["p1"], "new_act", ("p1",), "replays"),
    ([], "old_act", (), "replays"),
    ([], "new_act", (), "NonDeterminismError"),
    (["p_removed"], "old_act", (), "replays"),
    (["p1", "p_removed"], "new_act", ("p1",), "replays"),
], ids=["d1", "d2", "d3", "d4", "d5"])
def test_patch_table(history_patches: list[str], recorded: str, patches: tuple[str, ...], outcome: str) -> None:
    past = start("patched", patches=history_patches) + [task_scheduled(1, recorded)]
    result = run(past, [workflow_started(5)])
    assert result.patches == patches
    resp = result.response(instance_id=IID, completion_token="t")
    assert resp.HasField("version") == bool(patches)
    if outcome == "replays":
        assert list(result.actions) == []
        assert list(run(past, [workflow_started(5), task_completed(1)]).actions) == [complete(2, "ok")]
    else:
        [a] = result.actions
        assert (a.id, a.completeWorkflow.workflowStatus) == (2, pb.ORCHESTRATION_STATUS_FAILED)
        assert a.completeWorkflow.failureDetails.errorType == "NonDeterminismError"
        assert "name='new_act' and sequence number 1" in a.completeWorkflow.failureDetails.errorMessage


def test_patch_decisions_are_memoised_and_reported_once_per_true_call() -> None:
    assert run([], start("patched_twice")).patches == ("p1", "p1", "p2")
    # Replaying a pre-patch history: False during replay, and memoised for the rest of the execution.
    result = run(start("patched_twice"), [workflow_started(5)])
    assert result.patches == ()


# ---------------------------------------------------------------------------- versions


def test_no_pinned_version_runs_the_default_and_reports_its_name() -> None:
    result = run([], start("versioned"))
    assert list(result.actions) == [schedule(1, "echo", "v2", execution_id=eid(0, 0))]
    assert result.version_name == "v2"
    assert result.response(instance_id=IID, completion_token="t").version.name == "v2"


def test_pinned_version_present_runs_it_and_reports_it() -> None:
    result = run([], start("versioned", version="v1"))
    assert list(result.actions) == [schedule(1, "echo", "v1", execution_id=eid(0, 0))]
    assert result.version_name == "v1"


def test_version_pinned_in_an_earlier_turn_is_kept_on_replay() -> None:
    past = start("versioned", version="v1") + [task_scheduled(1, "echo", "v1")]
    result = run(past, [workflow_started(5), task_completed(1)])
    assert (list(result.actions), result.version_name) == ([complete(2)], "v1")


def test_pinned_version_missing_gives_one_version_not_available_action_and_no_version() -> None:
    past = start("versioned", version="v9") + [task_scheduled(1, "echo", "v9")]
    result = run(past, [workflow_started(5), task_completed(1)])
    assert list(result.actions) == [version_not_available(1)]
    assert result.version_name is None and result.patches == ()
    assert not result.response(instance_id=IID, completion_token="t").HasField("version")


def test_a_deployment_without_the_pinned_version() -> None:
    only_v2 = BUNDLE.restricted(versions={"versioned": ["v2"]})
    assert list(run([], start("versioned", version="v1"), bundle=only_v2).actions) == [version_not_available(1)]
    only_v1 = BUNDLE.restricted(versions={"versioned": ["v1"]})
    assert run([], start("versioned"), bundle=only_v1).version_name == "v1"
    none_left = BUNDLE.restricted(versions={"versioned": []})
    assert list(run([], start("versioned", version="v1"), bundle=none_left).actions) == [
        failed(1, "OrchestratorNotRegisteredError", "A 'versioned' orchestrator was not registered.")]


def test_pinned_version_on_an_unversioned_program_is_ignored() -> None:
    result = run([], start("act", "x", version="v1"))
    assert list(result.actions) == [schedule(1, "echo", "x", execution_id=eid(0, 0))]
    assert result.version_name is None


# ---------------------------------------------------------------------------- nondeterminism and registration


def _only_failure(acts: list[pb.WorkflowAction], error_type: str) -> str:
    assert len(acts) == 1, acts
    [a] = acts
    assert a.HasField("completeWorkflow")
    assert a.completeWorkflow.workflowStatus == pb.ORCHESTRATION_STATUS_FAILED
    assert a.completeWorkflow.failureDetails.errorType == error_type
    return a.completeWorkflow.failureDetails.errorMessage


def test_nondeterminism_wrong_activity_name() -> None:
    acts = actions(start("act", "x") + [task_scheduled(1, "other")], [workflow_started(5)])
    message = _only_failure(acts, "NonDeterminismError")
    assert acts[0].id == 2
    assert message.startswith("Failed to restore orchestration state due to a history mismatch: A previous "
                              "execution called call_activity with name='other' and sequence number 1, but the "
                              "current execution is instead trying to call echo")


def test_nondeterminism_wrong_kind() -> None:
    acts = actions(start("act", "x") + [timer_created(1, 5)], [workflow_started(5)])
    message = _only_failure(acts, "NonDeterminismError")
    assert "called create_timer with ID=1, but the current execution is instead trying to call call_activity" in message
    acts = actions(start("act", "x") + [child_created(1, "act", "wf-1:0001")], [workflow_started(5)])
    assert "called call_sub_orchestrator with ID=1" in _only_failure(acts, "NonDeterminismError")


def test_nondeterminism_id_the_program_does_not_produce() -> None:
    acts = actions(start("act", "x") + [task_scheduled(2, "echo")], [workflow_started(5)])
    message = _only_failure(acts, "NonDeterminismError")
    assert message.startswith("A previous execution called call_activity with ID=2, but the current execution "
                              "doesn't have this action with this ID.")


def test_nondeterminism_drops_pending_actions() -> None:
    # The program schedules two activities; history disagrees on the second: only the failure is sent.
    past = start("fan") + [task_scheduled(1, "echo", 1), task_scheduled(2, "other")]
    acts = actions(past, [workflow_started(5), task_completed(1, 1)])
    _only_failure(acts, "NonDeterminismError")
    assert acts[0].id == 4


def test_unknown_workflow_name_fails_not_registered() -> None:
    assert actions([], start("nope")) == [failed(1, "OrchestratorNotRegisteredError",
                                                 "A 'nope' orchestrator was not registered.")]


def test_unhandled_event_kind_fails_with_WorkflowStateError() -> None:
    done = pb.HistoryEvent(eventId=-1)
    done.executionCompleted.SetInParent()
    acts = actions(start("act", "x") + [task_scheduled(1, "echo")], [workflow_started(5), done])
    assert _only_failure(acts, "WorkflowStateError") == "Don't know how to handle event of type 'executionCompleted'"


def test_a_bad_json_input_fails_the_workflow_like_the_sdk() -> None:
    bad = execution_started("act")
    bad.executionStarted.input.value = "{not json"
    _only_failure(actions([], [workflow_started(0), bad]), "JSONDecodeError")


def test_empty_new_events_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one event"):
        run(start("act"), [])


# ---------------------------------------------------------------------------- suspend, resume, terminate, stall


def test_suspended_buffers_events_without_actions_until_resumed() -> None:
    past = start("act_then_act") + [task_scheduled(1, "echo", "a"), task_scheduled(2, "echo", "b")]
    held = [workflow_started(5), suspended(5), task_completed(1, "a"), task_completed(2, "b")]
    assert actions(past, held) == []
    past = past + held
    assert actions(past, [workflow_started(6), event_raised("x")]) == []
    # On resume the buffered events run first; this turn's WorkflowStarted(7) was buffered behind them, so the
    # new activity's execution id still uses time 5.
    assert actions(past, [workflow_started(7), resumed(7)]) == [schedule(3, "echo", "c", execution_id=eid(5, 2))]


def test_resume_while_not_suspended_changes_nothing() -> None:
    # Both real engines record it (R6.7); dapr-ext-workflow fails the workflow here, the contract does not.
    assert actions(start("act", "x") + [task_scheduled(1, "echo")], [workflow_started(5), resumed(5)]) == []


def test_a_second_suspend_keeps_the_workflow_suspended_until_one_resume() -> None:
    past = start("act", "x") + [task_scheduled(1, "echo")]
    held = [workflow_started(5), suspended(5), task_completed(1, "a", t=5), suspended(5)]
    assert actions(past, held) == []
    assert actions(past, held + [resumed(6)]) != []


def test_terminated_completes_terminated_with_the_output_as_sent() -> None:
    past = start("act", "x") + [task_scheduled(1, "echo")]
    assert actions(past, [workflow_started(5), terminated({"why": "ops"})]) == [
        complete(2, {"why": "ops"}, status=TERMINATED)]
    [a] = actions(past, [workflow_started(5), terminated()])
    assert a == complete(2, status=TERMINATED) and not a.completeWorkflow.HasField("result")


def test_terminate_is_not_held_back_by_suspension() -> None:
    past = start("act", "x") + [task_scheduled(1, "echo"), workflow_started(3), suspended(3)]
    assert actions(past, [workflow_started(5), terminated("t")]) == [complete(2, "t", status=TERMINATED)]


def test_execution_stalled_events_are_ignored() -> None:
    past = start("act", "x") + [execution_stalled(), task_scheduled(1, "echo", "x")]
    new = [workflow_started(5), execution_stalled(pb.VERSION_NOT_AVAILABLE), task_completed(1, "y")]
    assert actions(past, new) == [complete(2, "y")]


# ---------------------------------------------------------------------------- the response


def test_response_carries_instance_token_actions_and_no_version_when_nothing_to_report() -> None:
    resp = run([], start("act", "x")).response(instance_id=IID, completion_token="tok")
    assert (resp.instanceId, resp.completionToken) == (IID, "tok")
    assert list(resp.actions) == [schedule(1, "echo", "x", execution_id=eid(0, 0))]
    assert not resp.HasField("version")


def test_no_payload_sentinel_is_distinct_from_null() -> None:
    # histories.NONE leaves a payload unset; None encodes JSON null.
    assert not task_completed(1).taskCompleted.HasField("result")
    assert task_completed(1, None).taskCompleted.result.value == "null"
    assert NONE is not None
