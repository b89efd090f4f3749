"""Workflows across apps and history propagation (engine-rules §11), as daprd v1.18.2 does them.

One engine hosts several app ids (EngineConfig.apps); a worker belongs to the app whose address it
connected to. An action's `router.targetAppID` sends the activity or child workflow to that app's
workers; the result comes back to the caller's instance. The routers and ParentInstanceInfo.appID
are stamped where daprd stamps them (R11.3, R11.4). Propagated history (R11.7-R11.10) is assembled
here for each activity or child that asks for it, and for the next generation of a workflow that
received one.

Pure functions over a decided turn: `prepare` mutates the turn's protobuf records in place before
the engine commits them, and returns where each activity and child goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable

from taskhub_core.turn import Decision
from taskhub_wire import pb

from fake_sidecar.engine.config import EngineConfig
from fake_sidecar.engine.model import Instance, wire

_NONE = pb.HISTORY_PROPAGATION_SCOPE_NONE
_LINEAGE = pb.HISTORY_PROPAGATION_SCOPE_LINEAGE


@dataclass
class Routes:
    """Where the work a turn made goes: activity task id -> (app key, router for its result);
    child task id -> (app key, the history propagated to it); the next generation's received history."""

    activities: dict[int, tuple[str, pb.TaskRouter | None]] = field(default_factory=dict)
    children: dict[int, tuple[str, bytes | None]] = field(default_factory=dict)
    next_incoming: bytes | None = None
    generation_router: pb.TaskRouter | None = None


def action_router(config: EngineConfig, inst: Instance, action: pb.WorkflowAction) -> pb.TaskRouter:
    """R11.3: every action's router names the acting app as source (applier.go:67-74); a target
    is kept as the worker set it."""
    router = pb.TaskRouter(sourceAppID=config.app_name(inst.app))
    if action.HasField("router"):
        if action.router.HasField("targetAppID"):
            router.targetAppID = action.router.targetAppID
        if action.router.HasField("targetAppNamespace"):
            router.targetAppNamespace = action.router.targetAppNamespace
    return router


def target_key(config: EngineConfig, inst: Instance, router: pb.TaskRouter | None) -> str:
    """The app that runs what `router` routes: its target, else the caller's own app (R11.2)."""
    if router is not None and router.HasField("targetAppID") and router.targetAppID:
        return config.route_key(caller=inst.app, target=router.targetAppID)
    return inst.app


def activity_route(inst: Instance, task_id: int, config: EngineConfig) -> tuple[str, pb.TaskRouter | None]:
    """After a restart: an activity's app and router are its TaskScheduled's."""
    if not config.apps:
        return "", None
    for ev in inst.history:
        if ev.eventId == task_id and ev.HasField("taskScheduled"):
            router = pb.TaskRouter()
            router.CopyFrom(ev.router)
            return target_key(config, inst, router), router if ev.HasField("router") else None
    return inst.app, None


def stamp_start(config: EngineConfig, inst: Instance, events: Iterable[pb.HistoryEvent]) -> None:
    """An ExecutionStarted without a router gets {sourceAppID: its app} before the turn that carries it
    is sent (orchestrator/run.go:148-160 stamps the inbox, then builds the work item from it): an SDK
    learns its own app from it (durabletask-java sets no targetAppID before it knows)."""
    if not config.apps:
        return
    for ev in events:
        if ev.HasField("executionStarted") and not ev.HasField("router"):
            ev.router.sourceAppID = config.app_name(inst.app)


def prepare(config: EngineConfig, inst: Instance, resp: pb.WorkflowResponse, decision: Decision) -> Routes:
    """Stamp the turn's records (several apps only) and attach propagated histories; say where work goes."""
    multi = bool(config.apps)
    routers = {a.id: action_router(config, inst, a) for a in resp.actions}
    app = config.app_name(inst.app)
    routes = Routes()
    if multi:
        for ev in decision.events:
            if ev.eventId >= 0 and ev.eventId in routers:
                ev.router.CopyFrom(routers[ev.eventId])  # applier.go:96-338, `Router: action.Router`
        stamp_start(config, inst, decision.events)  # a no-op when the sent turn carried the event
        completion = next((a for a in resp.actions if a.HasField("completeWorkflow")), None)
        if completion is not None:
            routes.generation_router = routers[completion.id]  # applier.go:88-118
    for req in decision.activities:
        router = routers.get(req.taskId)
        routes.activities[req.taskId] = (target_key(config, inst, router) if multi else "",
                                         router if multi else None)
    received = _parse(inst.incoming)
    by_task = {req.taskId: req for req in decision.activities}
    for child in decision.children:
        router = routers.get(child.parent_task_id)
        if multi:
            if child.detached:  # applier.go:361-378: a target-only router, no back-reference
                child.start.ClearField("router")
                if router is not None and router.HasField("targetAppID"):
                    child.start.router.targetAppID = router.targetAppID
            else:
                if router is not None:
                    child.start.router.CopyFrom(router)
                # applier.go:472-487 (parentInstanceInfo): the parent's app, always.
                child.start.executionStarted.parentInstance.appID = app
        routes.children[child.parent_task_id] = (target_key(config, inst, router) if multi else inst.app, None)
    for a in resp.actions:
        kind = a.WhichOneof("workflowActionType")
        if kind == "scheduleTask":
            scope = a.scheduleTask.historyPropagationScope
        elif kind == "createChildWorkflow":
            scope = a.createChildWorkflow.historyPropagationScope
        else:
            continue
        if scope == _NONE:
            continue
        made = _upto(decision.events, a.id)
        if made is None:
            continue  # not recorded (after a completion, or a retried create): nothing is sent
        ph = assemble(scope=scope, received=received, own=list(inst.history) + made, app=app, iid=inst.iid)
        if kind == "scheduleTask" and a.id in by_task:
            by_task[a.id].propagatedHistory.CopyFrom(ph)  # applier.go:227-242, activity.go:84-94
        elif kind == "createChildWorkflow" and a.id in routes.children:
            key, _ = routes.children[a.id]
            routes.children[a.id] = (key, wire(ph))  # applier.go:304-317
    if decision.continue_as_new is not None and received is not None:
        # propagation.go:21-29 and applier.go:78-86: the received scope is forwarded into the next
        # generation with this generation's own chunk; a root workflow starts clean.
        ph = assemble(scope=received.scope, received=received, own=list(inst.history) + list(decision.events),
                      app=app, iid=inst.iid)
        routes.next_incoming = wire(ph)
    return routes


def unreachable(routes: Routes, inst: Instance, *, serves: Callable[[str], bool]) -> str | None:
    """R11.5: the first other app the turn routes work to that no worker serves, or None.

    daprd invokes the target app's actors while it commits the turn; with no worker connected there
    the app's actor types are not registered, the invocation fails and the whole turn is run again
    from its reminder (orchestrator/activity.go:133-135, messages/messages.go:169-170,
    orchestrator/run.go:416-459): the caller makes no progress until that app is back.
    """
    for app in [a for a, _ in routes.activities.values()] + [a for a, _ in routes.children.values()]:
        if app != inst.app and not serves(app):
            return app
    return None


def assemble(*, scope: int, received: pb.PropagatedHistory | None, own: list[pb.HistoryEvent], app: str,
             iid: str) -> pb.PropagatedHistory:
    """runtimestate/propagation.go:43-98: LINEAGE first forwards the chunks received, verbatim; then the
    workflow's own chunk (its app, id, name and every event of its generation so far)."""
    ph = pb.PropagatedHistory(scope=scope)  # type: ignore[arg-type]
    if scope == _LINEAGE and received is not None:
        ph.chunks.extend(received.chunks)
    if own:
        name = next((e.executionStarted.name for e in own if e.HasField("executionStarted")), "")
        chunk = ph.chunks.add(appId=app, instanceId=iid, workflowName=name)
        chunk.rawEvents.extend(wire(e) for e in own)
    return ph


def _upto(events: tuple[pb.HistoryEvent, ...], action_id: int) -> list[pb.HistoryEvent] | None:
    """The turn's events up to and including the one action `action_id` recorded."""
    for i, ev in enumerate(events):
        if ev.eventId == action_id and not ev.HasField("workflowStarted"):
            return list(events[: i + 1])
    return None


def _parse(raw: bytes | None) -> pb.PropagatedHistory | None:
    return None if raw is None else pb.PropagatedHistory.FromString(raw)


def completion_router(config: EngineConfig, child: Instance, parent: Instance) -> pb.TaskRouter | None:
    """R11.4: a child's result travels from its app to its parent's (applier.go:142-168)."""
    if not config.apps:
        return None
    return pb.TaskRouter(sourceAppID=config.app_name(child.app), targetAppID=config.app_name(parent.app))


# What a caller sees when a policy refuses the call (orchestrator/messages/status.go:23-25).
DENIED_TYPE, DENIED_MESSAGE = "WorkflowAccessPolicyDenied", "access denied by workflow access policy"


def denial(*, child: bool, task_id: int, now: pb.Timestamp, task_execution_id: str = "") -> pb.HistoryEvent:
    """R11.11: the TaskFailed / ChildWorkflowInstanceFailed daprd delivers for a refused call
    (orchestrator/activity.go:146-162, childwf.go:126-146), without a router. daprd's TaskFailed also
    lacks the TaskScheduled's taskExecutionId; the reference repeats it, as R2.5 says (R11.11 REF)."""
    ev = pb.HistoryEvent(eventId=-1, timestamp=now)
    failed = ev.childWorkflowInstanceFailed if child else ev.taskFailed
    failed.taskScheduledId = task_id
    if not child:
        ev.taskFailed.taskExecutionId = task_execution_id
    failed.failureDetails.errorType = DENIED_TYPE
    failed.failureDetails.errorMessage = DENIED_MESSAGE
    return ev
