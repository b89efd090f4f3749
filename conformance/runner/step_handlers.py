"""One handler per scenario step (conformance/scenario/steps.py), and the final wait for the expected states."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB

from conformance.failures import TargetMisbehaved
from conformance import stopping
from conformance.scenario import steps
from conformance.scenario.basics import MISSING
from conformance.scenario.matching import Matcher, contains_in_order
from conformance.scenario.steps import Step
from conformance.scenario.wire import event_dict, message_dict
from conformance.runner.slots import waiting
from conformance.runner.harness import (
    Harness, HarnessError, Run, Where, call_raw, call_rpc, do_start, instance_history, payload_text, step_failed,
    wait_status,
)

@dataclass(frozen=True, kw_only=True)
class At:
    """What every step handler gets besides its arguments: the run, its live pieces, the step."""

    run: Run
    h: Harness
    step: Step

    @property
    def where(self) -> Where:
        return Where(self.step.span, self.step.kind.name)

    @property
    def timeout(self) -> float:
        return self.run.scenario.timeout

    def rpc(self, rpc: str, request: Any) -> Any:
        return call_rpc(self.run, self.h.client, rpc, request, expect=self.step.expect_error, where=self.where,
                    timeout=self.timeout)

def _on_start(at: At, a: steps.Start) -> None:
    do_start(at.run, at.h, a.spec(expect_error=at.step.expect_error, span=at.step.span))

def _on_wait(at: At, a: steps.Wait) -> None:
    iid = at.run.iid(a.instance)
    timeout = a.timeout if a.timeout is not None else at.timeout
    began = time.monotonic()
    client = at.h.client_for(iid, within=timeout)  # the app that runs it, once one does
    wait_status(client, iid, list(a.statuses), max(timeout - (time.monotonic() - began), 0.1), where=at.where)

def _on_wait_history(at: At, a: steps.WaitHistory) -> None:
    run, iid = at.run, at.run.iid(a.instance)
    timeout = a.timeout if a.timeout is not None else at.timeout
    deadline = time.monotonic() + timeout
    client = at.h.client_for(iid, within=timeout)
    patterns = run.subst(list(a.contains_in_order))
    looks = client.looks()
    while True:
        looks.mark()
        events = [event_dict(e, with_router=bool(run.scenario.apps)) for e in instance_history(client, iid)]
        # Captures bind within this wait only: the scenario's expectations match with their own.
        why = contains_in_order(Matcher(captures=dict(run.vars)), patterns, events)
        if why is None:
            return
        if time.monotonic() > deadline:
            raise step_failed(at.where, f"{at.where}: after {timeout:g}s the history of {iid} still does not show "
                                        f"the events waited for: {why}", instance=iid)
        looks.pause(deadline - time.monotonic())

def _on_raise(at: At, a: steps.Raise) -> None:
    req = pb.RaiseEventRequest(instanceId=at.run.iid(a.instance), name=a.event)
    payload = payload_text(at.run.subst(a.data))
    if payload is not None:
        req.input.value = payload
    at.rpc("RaiseEvent", req)

def _on_suspend_or_resume(at: At, a: steps.Suspend | steps.Resume) -> None:
    suspend = isinstance(a, steps.Suspend)
    req = (pb.SuspendRequest if suspend else pb.ResumeRequest)(instanceId=at.run.iid(a.instance))
    if a.reason:
        req.reason.value = a.reason
    at.rpc("SuspendInstance" if suspend else "ResumeInstance", req)

def _on_terminate(at: At, a: steps.Terminate) -> None:
    req = pb.TerminateRequest(instanceId=at.run.iid(a.instance), recursive=a.recursive)
    payload = payload_text(at.run.subst(a.output))
    if payload is not None:
        req.output.value = payload
    at.rpc("TerminateInstance", req)

def _on_purge(at: At, a: steps.Purge) -> None:
    req = pb.PurgeInstancesRequest(instanceId=at.run.iid(a.instance), recursive=a.recursive)
    if a.force is not None:
        req.force = a.force
    at.rpc("PurgeInstances", req)

def _on_worker(at: At, a: steps.RestartWorker | steps.StartWorker | steps.StopWorker) -> None:
    scenario_apps = at.run.scenario.apps
    if a.app is not None and scenario_apps and a.app != scenario_apps[0].name:
        if not isinstance(a, steps.StartWorker):
            at.h.stop_app_worker(a.app)
        if not isinstance(a, steps.StopWorker):
            at.h.start_app_worker(a.app)
        return
    if not isinstance(a, steps.StartWorker):
        at.h.stop_worker()
    if not isinstance(a, steps.StopWorker):
        at.h.start_worker(programs=a.programs, versions=a.versions)

def _on_add_worker(at: At, a: steps.AddWorker) -> None:
    at.h.add_worker()

def _on_kill_sidecar(at: At, a: steps.KillSidecar) -> None:
    if a.app is not None:
        at.h.app_client(a.app)  # an app the scenario declares
        at.h.sidecar.kill(app=a.app)
    else:
        at.h.sidecar.kill()

def _on_restart_sidecar(at: At, a: steps.RestartSidecar) -> None:
    if a.app is not None:
        at.h.app_client(a.app)
        at.h.sidecar.restart(app=a.app)
    else:
        at.h.sidecar.restart()
    if at.h.sidecar.address != at.h.client.address:
        raise HarnessError(f"{at.where}: the sidecar came back on another address ({at.h.sidecar.address})")

def _on_advance_clock(at: At, a: steps.AdvanceClock) -> None:
    engine = getattr(at.h.sidecar, "engine", None)
    if engine is None:
        raise HarnessError(f"{at.where}: sidecar {at.run.pair.sidecar.name} has no clock the harness can move")
    engine.advance_clock(a.seconds)

def _on_sleep(at: At, a: steps.Sleep) -> None:
    # The step's point is to let the pair's time pass: on a virtual clock (the reference pair), engine
    # time, which jumps once nothing is in flight; else real time. An interrupt ends it either way.
    pass_time = getattr(at.h.sidecar, "pass_time", None)
    with waiting():  # the scenario's slot is free meanwhile (conformance/runner/slots.py)
        if pass_time is None or not pass_time(a.seconds):
            stopping.sleep(a.seconds)

def _on_call(at: At, a: steps.Call) -> None:
    run, h = at.run, at.h
    table = TASKHUB if a.rpc in TASKHUB.methods else DAPR_WORKFLOW
    method = table.method(a.rpc)
    try:
        request = json_format.ParseDict(run.subst(dict(a.request)), method.request())
    except json_format.ParseError as exc:
        raise HarnessError(f"{at.where}: request is not a {method.request.DESCRIPTOR.name}: {exc}") from None
    # `within`: the scenario waits for a state (a new generation's input, a history entry) by asking
    # again until the response matches, not by sleeping a margin that a loaded machine can miss.
    deadline = None if a.within is None else time.monotonic() + a.within
    looks = h.app_client(a.app).looks()
    while True:
        looks.mark()
        resp = call_raw(run, h.app_client(a.app), method, request, expect=at.step.expect_error, where=at.where,
                         timeout=at.timeout, metadata=a.metadata)
        if resp is None or a.response is MISSING:
            return
        matcher = Matcher(captures=dict(run.vars))
        mismatches = matcher.match(run.subst(a.response), message_dict(resp), "$")
        if not mismatches:
            run.vars.update(matcher.captures)  # `${NAME}` captured here can be used by later steps
            return
        if deadline is None or time.monotonic() > deadline:
            waited = "" if a.within is None else f" (still, after {a.within:g}s)"
            raise step_failed(at.where, f"{at.where}: {method.name} response{waited}: " + "; ".join(mismatches))
        looks.pause(deadline - time.monotonic())

def _on_release_replays(at: At, a: steps.ReleaseReplays) -> None:
    at.h.proxy.replay_pending()

def _on_cut_streams(at: At, a: steps.CutStreams) -> None:
    proxy = at.h.proxies.get(a.app) if a.app is not None else at.h.proxy
    if proxy is None:
        raise HarnessError(f"{at.where}: no app {a.app!r} in this scenario")
    proxy.cut_streams()

# One handler per argument class of the step registry (conformance/scenario/steps.py); a test checks
# that every kind has one.
HANDLERS: Mapping[type, Callable[[At, Any], None]] = {
    steps.Start: _on_start, steps.Wait: _on_wait, steps.WaitHistory: _on_wait_history, steps.Raise: _on_raise, steps.Suspend: _on_suspend_or_resume,
    steps.Resume: _on_suspend_or_resume, steps.Terminate: _on_terminate, steps.Purge: _on_purge,
    steps.RestartWorker: _on_worker, steps.StartWorker: _on_worker, steps.StopWorker: _on_worker,
    steps.AddWorker: _on_add_worker,
    steps.KillSidecar: _on_kill_sidecar, steps.RestartSidecar: _on_restart_sidecar,
    steps.AdvanceClock: _on_advance_clock, steps.Sleep: _on_sleep, steps.Call: _on_call,
    steps.ReleaseReplays: _on_release_replays, steps.CutStreams: _on_cut_streams,
}

def do_step(run: Run, h: Harness, step: Step) -> None:
    HANDLERS[type(step.args)](At(run=run, h=h, step=step), step.args)

def final_wait(run: Run, h: Harness) -> None:
    """Wait for every expected status to be reached (statuses are where the flow comes to rest)."""
    for key, exp in run.scenario.expect.items():
        if exp.status is None:
            continue
        iid = run.iid(key) if key in run.instances else str(run.subst(key))
        try:
            wait_status(h.client_for(iid), iid, [exp.status], run.scenario.timeout, where=Where(exp.span, "expect"))
        except TargetMisbehaved:
            return  # the expectations check reports the actual status, with every other mismatch
