"""A retry the worker did not make, read from an instance's history: the root cause of what it shows.

A workflow that failed because an activity (or a child workflow) failed, while the program's policy for
that call allowed more attempts and set no total timeout, was not retried by its worker. That breaks
ACT-RETRY-001 (CHILD-RETRY-001 for a child), and what the instance then shows (FAILED, no output, a history
without the retry) is charged there, not to whatever the scenario lists: durabletask-dapr 0.2.0a9 and
dapr-ext-workflow 0.5.0 retried only a policy with a max_retry_interval (docs/upstream-bugs.md), and their
verdicts named deduplication and token requirements.

Pure: a program bundle and recorded histories in, causes per instance out (conformance/attribution.py
charges them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from taskhub_programs import Bundle, CallActivity, CallChild, Retry, walk_steps
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind, event_kind

from conformance.attribution import Cause

# A failure event -> the event that opened its task, the program step that calls it, the requirement, a noun.
_FAILURES: Mapping[EventKind, tuple[EventKind, type, str, str]] = {
    EventKind.TASK_FAILED: (EventKind.TASK_SCHEDULED, CallActivity, "ACT-RETRY-001", "activity"),
    EventKind.CHILD_WORKFLOW_INSTANCE_FAILED: (EventKind.CHILD_WORKFLOW_INSTANCE_CREATED, CallChild,
                                               "CHILD-RETRY-001", "child workflow"),
}
# What a worker writes when it retries: the retry timer, or the next attempt at once.
_RETRY_SIGNS = frozenset({EventKind.TIMER_CREATED, EventKind.TASK_SCHEDULED, EventKind.CHILD_WORKFLOW_INSTANCE_CREATED})


def retry_policies(bundle: Bundle) -> dict[tuple[type, str], Retry]:
    """(step type, activity or workflow name) -> the retry policy of every call of that name. A name called
    with different policies, or once without one, is left out: its attempts cannot be told apart."""
    seen: dict[tuple[type, str], set[Retry | None]] = {}
    for family in bundle.programs.values():
        for program in family.versions.values():
            for _, step in walk_steps(program.steps, "$"):
                if isinstance(step, CallActivity):
                    seen.setdefault((CallActivity, step.name), set()).add(step.retry)
                elif isinstance(step, CallChild):
                    seen.setdefault((CallChild, step.workflow), set()).add(step.retry)
    return {key: next(iter(found)) for key, found in seen.items() if len(found) == 1 and None not in found}


def unretried(bundle: Bundle, histories: Mapping[str, Sequence[pb.HistoryEvent]]) -> dict[str, Cause]:
    """instance id -> the retry its worker did not make, for each instance whose history shows one."""
    policies = retry_policies(bundle)
    if not policies:
        return {}
    found = {iid: _unretried(events, policies) for iid, events in histories.items()}
    return {iid: cause for iid, cause in found.items() if cause is not None}


def _unretried(events: Sequence[pb.HistoryEvent], policies: Mapping[tuple[type, str], Retry]) -> Cause | None:
    if not events or event_kind(events[-1]) is not EventKind.EXECUTION_COMPLETED:
        return None
    if events[-1].executionCompleted.workflowStatus != pb.ORCHESTRATION_STATUS_FAILED:
        return None
    kinds = [event_kind(e) for e in events]
    last = next((i for i in range(len(kinds) - 1, -1, -1) if kinds[i] in _FAILURES), None)
    if last is None or any(k in _RETRY_SIGNS for k in kinds[last + 1:]):
        return None
    opener_kind, step_type, requirement, noun = _FAILURES[kinds[last]]
    body = getattr(events[last], kinds[last].field)
    if body.failureDetails.isNonRetriable:
        return None
    opener = next((e for e, k in zip(events, kinds) if k is opener_kind and e.eventId == body.taskScheduledId), None)
    if opener is None:
        return None
    name = getattr(opener, opener_kind.field).name
    policy = policies.get((step_type, name))
    if policy is None or policy.timeout is not None:  # a total timeout may end the attempts early
        return None
    attempts = sum(1 for e, k in zip(events, kinds) if k is opener_kind and getattr(e, opener_kind.field).name == name)
    if attempts >= policy.max_attempts:
        return None
    return Cause(requirement=requirement,
                 text=f"the worker did not retry: {noun} '{name}' failed (history event {last}) after "
                      f"{attempts} attempt(s) of the {policy.max_attempts} its retry policy allows, and the workflow "
                      "failed with no retry scheduled")


__all__ = ["retry_policies", "unretried"]
