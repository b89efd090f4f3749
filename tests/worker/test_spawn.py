"""The `spawn` step in the pure replay executor: a detached workflow started from the workflow's own code.

What the reference worker answers follows durabletask-go v0.14.0 (task/detached.go ScheduleNewWorkflow):
one CreateDetachedWorkflow action at the next id, no task to wait for, the default instance id
`<instance id>-<n>` (n counts default-id spawns of the execution), the spawn retired on replay by the
DetachedWorkflowInstanceCreated at its id, and a completion in the same turn that keeps it.
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from taskhub_programs import ProgramError, canonical_form, parse_bundle
from taskhub_programs.capabilities import needs
from fake_worker.replay import execute
from taskhub_wire import pb
from tests.worker.histories import (
    CONTINUED_AS_NEW, complete, create_detached, detached_created, event_raised, optional_timer,
    optional_timer_created, start, workflow_started,
)

BUNDLE = parse_bundle(yaml.safe_load(textwrap.dedent("""
    programs:
      spawn_and_return:
        steps:
          - spawn: {workflow: spawned, input: "${input}", instance_id: "${instance_id}-named"}
            as: s
          - return: "${s}"
      defaults:
        steps:
          - spawn: {workflow: spawned}
            as: a
          - spawn: {workflow: spawned, instance_id: explicit}
          - spawn: {workflow: spawned}
            as: b
          - return: ["${a}", "${b}"]
      spawn_then_wait:
        steps:
          - spawn: {workflow: spawned, instance_id: kid}
          - wait_event: go
          - return: done
      after_can:
        steps:
          - if:
              cond: {$eq: ["${input}", 0]}
              then: [{continue_as_new: {input: 1}}]
          - spawn: {workflow: spawned, instance_id: kid}
      empty_id:
        steps:
          - spawn: {workflow: spawned, instance_id: ""}
""")))


def actions(past: list[pb.HistoryEvent], new: list[pb.HistoryEvent]) -> list[pb.WorkflowAction]:
    return list(execute(BUNDLE, instance_id="wf-1", past=past, new=new).actions)


def test_a_spawn_and_the_completion_go_out_together() -> None:
    assert actions([], start("spawn_and_return", "x")) == [
        create_detached(1, "spawned", "wf-1-named", "x"), complete(2, "wf-1-named")]


def test_default_ids_count_only_default_id_spawns_from_zero() -> None:
    assert actions([], start("defaults")) == [
        create_detached(1, "spawned", "wf-1-0"), create_detached(2, "spawned", "explicit"),
        create_detached(3, "spawned", "wf-1-1"), complete(4, ["wf-1-0", "wf-1-1"])]


def test_replay_retires_the_spawn_by_its_event_and_does_not_spawn_again() -> None:
    past = start("spawn_then_wait") + [detached_created(1, "kid"), optional_timer_created(2, "go")]
    assert actions(past, [workflow_started(1), event_raised("go")]) == [complete(3, "done")]


def test_the_first_turn_spawns_and_waits() -> None:
    assert actions([], start("spawn_then_wait")) == [create_detached(1, "spawned", "kid"), optional_timer(2, "go")]


def test_a_recorded_spawn_of_another_instance_is_a_history_mismatch() -> None:
    past = start("spawn_then_wait") + [detached_created(1, "someone-else"), optional_timer_created(2, "go")]
    (only,) = actions(past, [workflow_started(1), event_raised("go")])
    details = only.completeWorkflow.failureDetails
    assert details.errorType == "NonDeterminismError"
    assert "'someone-else'" in details.errorMessage and "'kid'" in details.errorMessage


def test_a_recorded_spawn_where_the_program_makes_none_is_a_history_mismatch() -> None:
    past = start("spawn_then_wait") + [detached_created(1, "kid"), detached_created(5, "kid")]
    (only,) = actions(past, [workflow_started(1)])
    assert only.completeWorkflow.failureDetails.errorType == "NonDeterminismError"


def test_continue_as_new_sends_no_spawn_and_the_next_generation_spawns_once() -> None:
    assert actions([], start("after_can", 0)) == [complete(1, 1, status=CONTINUED_AS_NEW)]
    assert actions([], start("after_can", 1)) == [create_detached(1, "spawned", "kid"), complete(2)]


def test_an_empty_instance_id_fails_the_workflow() -> None:
    (only,) = actions([], start("empty_id"))
    assert only.completeWorkflow.failureDetails.errorType == "SpawnError"


def test_spawn_needs_detached_spawn_and_has_a_canonical_form() -> None:
    assert ("detached_spawn", "$.programs.spawn_and_return.steps[0].spawn") in set(needs(BUNDLE))
    form = canonical_form({"p": {"steps": [{"spawn": {"workflow": "w"}}]}})
    assert form["programs"]["p"]["versions"][0]["steps"] == [
        {"step": "spawn", "workflow": "w", "input": {"lit": None}, "instance_id": None, "as": None}]


def test_a_spawn_without_a_workflow_is_a_load_error() -> None:
    with pytest.raises(ProgramError, match=r"spawn: missing required key\(s\) \['workflow'\]"):
        parse_bundle({"programs": {"p": {"steps": [{"spawn": {"input": 1}}]}}})
