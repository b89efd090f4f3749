"""How an engine is set up (its options) and what it counts while it runs."""

from __future__ import annotations

import enum
import fnmatch
from dataclasses import dataclass

from fake_sidecar.engine.turns import PayloadLimit


class TaskExecutionIdMode(enum.Enum):
    """Who makes ActivityRequest.taskExecutionId (the spec, "task execution id"):

    SPEC: the sidecar, a fresh id on every dispatch (a redelivery after a lease or a broken stream
    gets a new one, unlike task_id); the completion records the id of the attempt it answers.
    PASSTHROUGH: the SDK's ScheduleTask id unchanged on every dispatch, as durabletask-go and daprd do.
    """

    SPEC = "spec"
    PASSTHROUGH = "passthrough"


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a WorkflowAccessPolicy, for the `schedule` operation: who may call which names."""

    callers: frozenset[str]
    workflows: tuple[str, ...] = ()  # name patterns (glob)
    activities: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineConfig:
    activity_lease_s: float | None = None
    max_payload: int | None = None
    # PASSTHROUGH by default until the suite's R2.5 check (TaskCompleted repeats its TaskScheduled's id) is
    # re-judged: see docs/fuzzing.md, "Task execution ids".
    task_execution_id: TaskExecutionIdMode = TaskExecutionIdMode.PASSTHROUGH
    # The transport's message limit: nothing bigger may be dispatched, or the worker refuses it
    # and gets it again on every reconnect (issue 11).
    max_message_bytes: int | None = None
    strict_tokens: bool = False  # refuse completions without a token (see EnginePolicy.token_ok)
    # Several apps in one engine (R11.1): their ids, the first the default app (its key is ""). Empty:
    # one app and no routers stamped, as before apps existed.
    apps: tuple[str, ...] = ()
    # Workflow access policies (R11.11): app id -> its rules; an app listed here refuses the activities
    # and children other apps schedule on it unless a rule grants them. No entry: no policy, all allowed.
    access_policies: tuple[tuple[str, tuple[PolicyRule, ...]], ...] = ()
    # The `scopes` of an app's policy resource (app id -> app ids; no entry: that app alone): an app
    # not in them does not load it (dapr pkg/internal/loader/disk/disk.go:95-98; R11.11).
    policy_scopes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # App id -> its own namespace; the apps without one share the default (""). A call reaches only
    # apps of the caller's namespace (R11.14).
    namespaces: tuple[tuple[str, str], ...] = ()
    # App id -> its own payload limit in bytes, over max_payload (daprd's --max-body-size per daprd; R11.15).
    app_max_payload: tuple[tuple[str, int], ...] = ()

    def allows(self, *, caller: str, target: str, kind: str, name: str) -> bool:
        """Whether app `caller` may schedule the `kind` ("workflow" / "activity") `name` on app `target`
        (dapr pkg/acl/workflow/policy.go:111-138; a self-call is exempt, orchestrator/accesspolicy.go:43-46)."""
        if caller == target:
            return True
        rules = dict(self.access_policies).get(target)
        scopes = dict(self.policy_scopes).get(target)
        if rules is None or (scopes and target not in scopes):
            return True
        return any(caller in rule.callers and any(fnmatch.fnmatchcase(name, pattern) for pattern in
                                                  (rule.workflows if kind == "workflow" else rule.activities))
                   for rule in rules)

    def app_name(self, key: str) -> str:
        """The app id a key stands for ("" is the default app)."""
        return key or (self.apps[0] if self.apps else "")

    def app_key(self, name: str) -> str:
        """The key of app id `name` (the default app's is "")."""
        return "" if not self.apps or name == self.apps[0] else name

    def namespace_of(self, key: str) -> str:
        """The namespace of the app with key `key` ("" the scenario's shared one)."""
        return dict(self.namespaces).get(self.app_name(key), "")

    def route_key(self, *, caller: str, target: str) -> str:
        """The key of the app a call from app key `caller` to app id `target` reaches: daprd names the
        target's actor type in the caller's own namespace (common.go:20-32, targetAppNamespace unused,
        orchestrator/activity.go:105-108), so an app of another namespace is not found there: the key
        "<namespace>/<app>", which no app has, keeps the work waiting as for an unknown app (R11.5)."""
        key = self.app_key(target)
        if target in self.apps and self.namespace_of(key) != self.namespace_of(caller):
            return f"{self.namespace_of(caller)}/{target}"
        return key

    # Settings daprd takes from its Configuration (spec.workflow): work items of a kind out on the
    # streams at once, and how long a finished instance is kept, in seconds per final status
    # ("COMPLETED", "FAILED", "TERMINATED"; "ANY" for the others), as stateRetentionPolicy.
    max_concurrent_workflows: int | None = None
    max_concurrent_activities: int | None = None
    retention_s: tuple[tuple[str, float], ...] = ()
    stateful_history: bool = True  # send deltas to streams that announce WORKER_CAPABILITY_STATEFUL_HISTORY
    # R6.3: keep a wait's timeout timer when its event commits first, so its TimerFired is delivered
    # late, as durabletask-go's sidecar and daprd before v1.17.2 do (daprd v1.18.1+ deletes the reminder,
    # orchestrator/timer.go deleteCancelledEventTimers). Off: the reference's DAPR behaviour.
    late_timeout_timers: bool = False

    def retention_after(self, status: str) -> float | None:
        kept = dict(self.retention_s)
        return kept.get(status, kept.get("ANY"))

    def payload_limit(self, app: str = "") -> PayloadLimit | None:
        """The tighter of --max-payload (app key `app`'s own limit, if it has one) and
        --max-message-bytes, named by its flag."""
        own = dict(self.app_max_payload).get(self.app_name(app)) if self.apps else None
        limits = [PayloadLimit(limit=n, flag=flag) for n, flag in
                  ((own or self.max_payload, "--max-payload"), (self.max_message_bytes, "--max-message-bytes"))
                  if n]
        return min(limits, key=lambda lim: lim.limit) if limits else None


@dataclass
class Counters:
    zombie_activity: int = 0
    zombie_turn: int = 0
    unknown_activity: int = 0
    unknown_turn: int = 0
    duplicate_dropped: int = 0
    abandoned_turns: int = 0
    redispatched_activities: int = 0
