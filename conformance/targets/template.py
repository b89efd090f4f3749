"""The capabilities a target can declare, and the starting target file `conformance init-target` writes.

A scenario's `requires` names capabilities; a pair that lacks one gets NOT_APPLICABLE for it.
Turn-level vectors are also sent in the worker's dialect (ids_from_one, event_wait_timer,
timer_origins: conformance/dialects/vectors.py), so a wrong declaration fails vectors.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

WORKER_CAPABILITIES: dict[str, str] = {
    "events": "wait_event / external events",
    "timers": "durable timers",
    "children": "child workflows",
    "suspend": "suspend and resume",
    "retries": "activity and child retry policies",
    "retry_timeout": "a retry policy's total timeout (`retry: {timeout: ...}`): no attempt once the delays reach it",
    "patching": "patches (is_patched) reported in the turn's version",
    "versions": "named workflow versions",
    "carry_events": "continue-as-new that carries unprocessed events over",
    "ledger": "activities append to the ledger file (CONFORMANCE_LEDGER) so at-least-once runs are counted",
    "task_execution_id": "ScheduleTask carries a non-empty taskExecutionId",
    "teid_uuid5": "taskExecutionId is dapr-ext-workflow's UUIDv5 of instance id, turn time and call counter",
    "ids_from_one": "action ids count 1, 2, 3... (the Python and JS SDKs); without it, from 0",
    "event_wait_timer": "an indefinite wait_event reserves an action id with a far-future timer (dapr-ext-workflow)",
    "timer_origins": "CreateTimer carries its origin (createTimer, externalEvent, activityRetry, ...)",
    "event_wait_ids": "each event wait takes an action id of its own without a timer (durabletask-java)",
    "resume_releases_at_once": "on resume, every event held while suspended is applied before the code runs again "
                               "(durabletask-go, durabletask-java): a wait reached then makes no timer for a held event",
    "patch_after_past": "a patch first met while the turn's new events are processed is taken (the Python SDKs)",
    "all_fails_fast": "an `all` fails as soon as one of its tasks fails (not only once the earlier ones are done)",
    "stateful_history": "announces WORKER_CAPABILITY_STATEFUL_HISTORY and takes cachedHistory deltas",
    "adversary": "can misbehave on purpose (the reference worker only)",
    "crossapp": "calls an activity or child workflow on another app (`app:`, WorkflowAction.router.targetAppID)",
    "propagation": "asks for history propagation (`propagation:`) and hands an activity what it received",
    "propagated_events": "the `propagated` built-in with {\"events\": true} lists each received chunk's events",
    "detached_spawn": "the `spawn` step: a detached workflow from workflow code (default id `<instance id>-<n>`)",
}
SIDECAR_CAPABILITIES: dict[str, str] = {
    "restart": "the harness can kill and restart it on the same store",
    "stalls": "stalls a workflow on a patch mismatch (ExecutionStalled)",
    "payload_limit": "stalls on PAYLOAD_SIZE_EXCEEDED over a size limit",
    "virtual_clock": "a virtual clock: long timers fire at once",
    "activity_lease": "redispatches an activity after a lease",
    "rerun": "RerunWorkflowFromEvent",
    "list_paging": "ListInstanceIDs pages",
    "api_token": "checks dapr-api-token metadata",
    "purge_force": "force purge",
    "reuse_id": "reuses a finished instance id unless enforced",
    "send_event": "the SendEvent action",
    "terminate_action": "the TerminateWorkflow action",
    "runtime_api": "the Dapr runtime workflow methods on the same port",
    "unknown_is_not_found": "operations on an unknown instance answer NOT_FOUND",
    "history_not_found": "GetInstanceHistory of an unknown instance answers NOT_FOUND",
    "own_engine": "the engine holds only this scenario's instances (one engine per scenario), so listings are its own",
    "apps": "hosts several app ids, one address each, and routes by TaskRouter (workflows across apps)",
    "history_propagation": "delivers propagated history to activities and children (HistoryPropagationScope)",
    "access_policy": "enforces an app's workflow access policy on calls from other apps (the `schedule` operation)",
    "app_namespaces": "runs an app in a namespace of its own (`namespace:` of an app; a call reaches its own namespace only)",
    "app_body_limits": "gives an app its own message limit (`max_body_size:` of an app; daprd --max-body-size per daprd)",
    "mtls": "runs with mTLS identities from a CA (daprd with Sentry): a callee knows which app calls it",
    "history_signing": "signs history and attests every activity and child completion (daprd's WorkflowHistorySigning, "
                       "with mTLS: the daprd-signing target; R12.7)",
    "purge_filter": "PurgeInstances with a PurgeInstanceFilter (many instances in one call)",
    "start_tags": "keeps a start's tags on its ExecutionStarted",
    "detached_workflows": "CreateDetachedWorkflow (DetachedWorkflowInstanceCreated, R3.12)",
    # One per engine setting a scenario can ask for (`engine:`, conformance/scenario/engine.py).
    "engine_retention": "can be started with a retention of finished instances (daprd stateRetentionPolicy)",
    "engine_max_concurrent_workflows": "can be started with a limit of workflow turns in flight",
    "engine_max_concurrent_activities": "can be started with a limit of activities in flight",
    "engine_max_body_size": "can be started with a message size limit (daprd --max-body-size)",
    "engine_stateful_history": "can be started sending, or not sending, history deltas to stateful workers",
    "engine_late_timeout_timers": "delivers a wait's timeout TimerFired after its event won (R6.3: durabletask-go's "
                                  "sidecar always, the reference when asked; daprd v1.18.1+ deletes the timer)",
}


def unknown_capabilities(names: Iterable[str], *, known: Iterable[str]) -> list[str]:
    """A problem line per name that is neither a known capability nor one the scenarios require."""
    known = set(known)
    out = []
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            out.append(f"unknown capability {name!r}{hint} (known: {', '.join(sorted(known))})")
    return out


def render_target(*, name: str, command: str | None = None) -> str:
    """A target file declaring one command worker `name`, every capability listed and commented out."""
    command = command or "/path/to/my-driver --sidecar {address} --programs {programs}"
    caps = "\n".join(f"      # - {cap:<18} # {what}" for cap, what in WORKER_CAPABILITIES.items()
                     if cap != "adversary")
    return f"""\
# A worker target for `conformance run --targets THIS_FILE --worker {name}` (docs/sdk-authors.md).
# It adds to the built-in targets; a name that is already declared is an error.
workers:
  {name}:
    kind: command
    # The driver: interprets the program language (docs/programs.md) with your SDK and connects to
    # the sidecar. Placeholders: {{address}} {{host}} {{port}} {{programs}} (a JSON bundle file),
    # {{canonical}} (the same programs in their canonical form, docs/programs.md), {{ledger}},
    # {{python}} (this interpreter), {{root}} (the library root). Exit 3 when a program
    # uses a step your SDK cannot express (the scenario is then NOT_APPLICABLE).
    command: "{command}"
    # Printed by the driver on stdout once its worker stream is open; scenarios start after it.
    ready_line: "^connected to "
    # What your SDK does: uncomment what it supports. A scenario that requires a capability you
    # do not declare is NOT_APPLICABLE; one you declare but do not meet FAILS.
    capabilities:
{caps}
    # Known gaps: shown as KNOWN_FAILURE with the reason, never hidden; a gap that starts
    # passing is reported so it can be removed. `scenarios` narrows it to some scenario ids.
    not_implemented: []
      # - requirement: TMR-TIMEOUT-001
      #   scenarios: [timers/timeout-timer-cancelled-by-event]
      #   reason: the timeout timer is not cancelled by its event yet
      #   evidence: output "timed out" where "granted" was expected
"""
