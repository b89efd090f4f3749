"""Run one scenario on one target pair and return its ScenarioFinished event.

Order: start the sidecar, the fault proxy in front of it (the worker talks only
to the proxy, so every worker message is in the transcript), then the worker;
run the starts and steps with the harness's own client; wait for the expected
states; observe; tear everything down; run the checks.
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_core.delivery import suspended_after, terminates
from taskhub_wire.kinds import PRODUCED_FIELDS
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, TaskHubClient

from conformance.checks import ALWAYS, FlowObservation, Observation, VectorObservation, run_check
from conformance.events import Outcome, ScenarioFinished, TranscriptEntry
from conformance.failures import TargetMisbehaved, failures_of, render, reproduce_line
from conformance.reporting.logs import adopt
from conformance.scenario import steps
from conformance.scenario.model import MISSING, Compare, ErrorExpect, Reach, Scenario, ScenarioKind, StartSpec
from conformance.scenario.placeholders import substitute
from conformance.scenario.steps import Step
from conformance.scenario.wire import event_dict, message_dict
from conformance.runner.isolation import claimer
from conformance.targets.base import CannotExpress, Gap, Pair, Replayer, WorkerStart
from conformance.verdict import Level, Mismatch, judge


@functools.cache
def requirement_levels() -> Mapping[str, str]:
    """Requirement id -> catalogue level, from the shipped catalogue (read once per process)."""
    from conformance.reporting.catalogue import load_catalogue

    return {r.id: r.level for r in load_catalogue()}


@functools.cache
def requirement_sources() -> Mapping[str, str]:
    from conformance.reporting.catalogue import load_catalogue

    return {r.id: r.source for r in load_catalogue()}


class HarnessError(Exception):
    """The scenario could not be run as written on this pair (an ERROR, not a conformance failure)."""


@dataclass(frozen=True)
class _Where:
    """Where a step (or the final wait) is written: `file:line what`, and the span apart for its failures."""

    span: Any  # conformance.scenario.source.Span
    what: str

    def __str__(self) -> str:
        return f"{self.span} {self.what}"


def _step_failed(where: _Where, text: str, *, expected: str | None = None, got: str | None = None) -> TargetMisbehaved:
    """A step's own expectation did not hold (e.g. an RPC that should fail succeeded): the target misbehaved."""
    return TargetMisbehaved(check="step", mismatches=[Mismatch(text=text, location=str(where.span), expected=expected,
                                                               got=got)])


def _status_name(value: int) -> str:
    return pb.OrchestrationStatus.Name(value).removeprefix("ORCHESTRATION_STATUS_")


@dataclass
class _Client:
    """The harness's client of the sidecar; every call lands in the transcript."""

    address: str
    metadata: tuple[tuple[str, str], ...]
    began: float
    transcript: list[TranscriptEntry] = field(default_factory=list)
    claim: Callable[[Any], None] = lambda request: None  # runner/isolation.py
    # Every call with its answer, polls included (`conformance engines-diff` compares them; the
    # transcript leaves polls out): (t, rpc, request, response or None, "CODE: details" or None).
    calls: list[tuple[float, str, Any, Any, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Any answer size: an engine started with a larger max_body_size answers above gRPC's 4 MiB default.
        self.channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", -1)])
        self.client = TaskHubClient(self.channel, metadata=self.metadata)
        self.lock = threading.Lock()

    def call(self, rpc: str, request: Any, *, timeout: float) -> Any:
        t = time.monotonic() - self.began
        self.claim(request)
        try:
            resp = self.client.call(rpc, request, timeout=timeout)
        except grpc.RpcError as exc:
            self._log(t, rpc, request, None, f"{exc.code().name}: {exc.details()}")
            self.calls.append((t, rpc, request, None, f"{exc.code().name}: {exc.details()}"))
            raise
        self.calls.append((t, rpc, request, resp, None))
        if rpc not in ("GetInstance", "GetInstanceHistory"):  # polling would drown the transcript
            self._log(t, rpc, request, resp, None)
        return resp

    def _log(self, t: float, rpc: str, request: Any, resp: Any, status: str | None) -> None:
        req = json_format.MessageToDict(request)
        summary = f"{rpc} {json.dumps(req)[:140]}" + (f" -> {status}" if status else "")
        with self.lock:
            self.transcript.append(TranscriptEntry(t=t, channel="client", direction="request", rpc=rpc,
                                                   summary=summary, message=req, status=status))

    def close(self) -> None:
        self.channel.close()


@dataclass
class _Run:
    scenario: Scenario
    pair: Pair
    work_dir: Path
    reproduce: str
    began: float = field(default_factory=time.monotonic)
    instances: dict[str, str] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)  # values captured from `call` responses

    # -- helpers ---------------------------------------------------------------------------

    def subst(self, value: Any) -> Any:
        """`${name}` placeholders -> instance ids (or values captured by `call` steps)."""
        return substitute(value, ids=self.instances, values=self.vars)

    def iid(self, name: Any) -> str:
        name = str(name or "main")
        if name in self.instances:
            return self.instances[name]
        return str(self.subst(name))


def _payload(value: Any) -> str | None:
    return None if value is MISSING else json.dumps(value)


def _expect_error(exc: grpc.RpcError, want: ErrorExpect, where: _Where) -> None:
    code = exc.code().name
    if want.codes and code not in want.codes:
        raise _step_failed(where, f"{where}: expected status {'/'.join(want.codes)}, got {code}: {exc.details()}",
                           expected="/".join(want.codes), got=code)
    if want.details and not re.search(want.details, exc.details() or ""):
        raise _step_failed(where, f"{where}: status details {exc.details()!r} do not match /{want.details}/")


def _rpc(run: _Run, client: _Client, rpc: str, request: Any, *, expect: ErrorExpect | None, where: _Where,
         timeout: float) -> Any:
    try:
        resp = client.call(rpc, request, timeout=timeout)
    except grpc.RpcError as exc:
        if expect is not None:
            _expect_error(exc, expect, where)
            return None
        raise _step_failed(where, f"{where}: {rpc} failed: {exc.code().name}: {exc.details()}") from None
    if expect is not None:
        raise _step_failed(where, f"{where}: expected {rpc} to fail ({'/'.join(expect.codes) or 'non-OK'}"
                         f"{', details /' + expect.details + '/' if expect.details else ''}), but it succeeded")
    return resp


def _raw_call(run: "_Run", client: "_Client", method: Any, request: Any, *, expect: ErrorExpect | None,
              where: _Where, timeout: float, metadata: tuple[tuple[str, str], ...] | None) -> Any:
    """Any RPC of either service on a sidecar (the client's app), optionally with exactly the given metadata."""
    call = client.channel.unary_unary(method.path, request_serializer=method.request.SerializeToString,
                                       response_deserializer=method.response.FromString)
    t = time.monotonic() - run.began
    client.claim(request)
    try:
        resp = call(request, timeout=timeout, metadata=client.metadata if metadata is None else metadata)
    except grpc.RpcError as exc:
        client._log(t, method.name, request, None, f"{exc.code().name}: {exc.details()}")
        client.calls.append((t, method.name, request, None, f"{exc.code().name}: {exc.details()}"))
        if expect is not None:
            _expect_error(exc, expect, where)
            return None
        raise _step_failed(where, f"{where}: {method.name} failed: {exc.code().name}: {exc.details()}") from None
    client._log(t, method.name, request, resp, None)
    client.calls.append((t, method.name, request, resp, None))
    if expect is not None:
        raise _step_failed(where, f"{where}: expected {method.name} to fail ({'/'.join(expect.codes) or 'non-OK'}), "
                         "but it succeeded")
    return resp


def _state(client: _Client, iid: str) -> dict[str, Any] | None:
    resp = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True), timeout=10)
    if not resp.exists:
        return None
    st = resp.workflowState
    out: dict[str, Any] = {"status": _status_name(st.workflowStatus), "name": st.name}
    out["output"] = st.output.value if st.HasField("output") else None
    out["input"] = st.input.value if st.HasField("input") else None
    out["custom_status"] = st.customStatus.value if st.HasField("customStatus") else None
    if st.HasField("failureDetails"):
        out["failure"] = {"errorType": st.failureDetails.errorType, "errorMessage": st.failureDetails.errorMessage}
    return out


def _history(client: _Client, iid: str) -> list[Any]:
    try:
        return list(client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid), timeout=10).events)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return []
        raise


def _wait_status(client: _Client, iid: str, wanted: Sequence[str], timeout: float, *, where: _Where) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last = None
    failed: str | None = None
    while True:
        try:
            last, failed = _state(client, iid), None
        except grpc.RpcError as exc:
            # A poll that fails once is asked again (daprd 1.18.2 sometimes answers GetInstance during a
            # save with UNKNOWN "inbox key ... missing from state store"); one that keeps failing until
            # the deadline is the engine's failure, reported as such.
            failed = f"{exc.code().name}: {exc.details()}"
        if failed is None and last is not None and last["status"] in wanted:
            return last
        if time.monotonic() > deadline:
            if failed is not None:
                raise _step_failed(where, f"{where}: GetInstance {iid} failed until the deadline: {failed}")
            got = "no such instance" if last is None else last["status"]
            why = ""
            if last and last.get("failure"):
                why = f" ({last['failure']['errorType']}: {last['failure']['errorMessage'][:200]})"
            raise _step_failed(where, f"{where}: instance {iid} did not reach {'/'.join(wanted)} within {timeout:g}s; "
                                      f"it is {got}{why}", expected="/".join(wanted), got=got)
        time.sleep(0.02)


class _Harness:
    """The live pieces of one run: sidecar, proxy, worker, client."""

    def __init__(self, run: _Run, stack: ExitStack) -> None:
        self.run = run
        self.stack = stack
        sc = run.scenario
        self.ledger = run.work_dir / "ledger.jsonl"
        self.ledger.touch()
        options = dict(sc.sidecar)
        if sc.apps:
            options["apps"] = [app.name for app in sc.apps]
            policies = {app.name: app.access_policy for app in sc.apps if app.access_policy is not None}
            if policies:
                options["access_policies"] = policies
        if sc.engine.asked():
            options["engine"] = sc.engine
        self.sidecar = run.pair.sidecar.start(options=options, work_dir=run.work_dir)
        stack.callback(self._stop_sidecar)
        from conformance.proxy import FaultProxy

        # Several apps: one proxy, client and worker per app, on that app's address (R11.1); the first
        # app's are `proxy`, `client` and `worker`, and the scenario's faults apply to its proxy.
        addresses = self._app_addresses()
        self.proxies: dict[str, Any] = {}
        self.clients: dict[str, _Client] = {}
        token = sc.sidecar.get("api_token")
        for i, (app, address) in enumerate(addresses.items()):
            proxy = FaultProxy.start(upstream=address, rules=sc.faults if i == 0 else (), t0=run.began)
            adopt(proxy)  # its log lines (and tracebacks) go to this scenario's log
            stack.callback(proxy.stop)
            client = _Client(address, (("dapr-api-token", token),) if token else (), run.began,
                             claim=claimer(proxy))
            stack.callback(client.close)
            self.proxies[app], self.clients[app] = proxy, client
        first = next(iter(addresses))
        self.proxy, self.client = self.proxies[first], self.clients[first]
        self.bundle, self.bundle_doc = sc.programs, dict(sc.programs_doc)
        self.worker = None
        self.more_workers: list[Any] = []  # `add_worker`: more workers beside the first, on the same engine
        self.app_workers: dict[str, Any] = {}  # several apps: the workers of the apps after the first
        self.zombies: list[str] = []
        self.start_worker()
        for app in sc.apps[1:]:
            self.start_app_worker(app.name)
        stack.callback(self.stop_worker)
        stack.callback(self.stop_more_workers)
        stack.callback(self.stop_app_workers)

    def _app_addresses(self) -> dict[str, str]:
        apps = self.run.scenario.apps
        if not apps:
            return {"": self.sidecar.address}
        known = getattr(self.sidecar, "app_addresses", None) or {}
        missing = [a.name for a in apps if a.name not in known]
        if missing:
            raise CannotExpress(f"sidecar {self.run.pair.sidecar.name} did not start apps {', '.join(missing)}; "
                                "a scenario with several apps needs a sidecar that hosts them (capability apps)")
        return {a.name: known[a.name] for a in apps}

    def app_client(self, app: str | None) -> _Client:
        if app is None or not self.run.scenario.apps:
            return self.client
        if app not in self.clients:
            raise HarnessError(f"no app {app!r} in this scenario; its apps: {', '.join(self.clients)}")
        return self.clients[app]

    def client_for(self, iid: str) -> _Client:
        """The client of the app whose sidecar knows instance `iid` (each app sees only its own, R11.6)."""
        if len(self.clients) == 1:
            return self.client
        for client in self.clients.values():
            try:
                if client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid), timeout=10).exists:
                    return client
            except grpc.RpcError:
                continue
        return self.client

    def _app_bundle(self, app: str) -> tuple[Any, dict[str, Any]]:
        from taskhub_programs import parse_bundle

        spec = next(a for a in self.run.scenario.apps if a.name == app)
        doc = {name: body for name, body in self.bundle_doc.items() if name in spec.programs}
        if not doc:  # an app that only runs activities still needs a program for the bundle to be valid
            doc = {"__idle": {"steps": [{"return": None}]}}
        return parse_bundle({"programs": doc}), doc

    def start_app_worker(self, app: str) -> None:
        from conformance.scenario.model import AppWorker
        from conformance.targets.reference import start_reference_worker

        spec = next((a for a in self.run.scenario.apps if a.name == app), None)
        if spec is None:
            raise HarnessError(f"no app {app!r} in this scenario")
        if spec is self.run.scenario.apps[0]:
            self.start_worker()
            return
        bundle, doc = self._app_bundle(app)
        start = WorkerStart(address=self.proxies[app].address, bundle=bundle, bundle_doc=doc,
                            work_dir=self.run.work_dir / f"app-{app}", ledger=self.ledger,
                            api_token=self.run.scenario.sidecar.get("api_token"),
                            max_message_bytes=self.run.scenario.engine.max_body_size)
        start.work_dir.mkdir(exist_ok=True)
        starter = start_reference_worker if spec.worker is AppWorker.REFERENCE else self.run.pair.worker.start
        self.app_workers[app] = starter(start)
        ready = getattr(self.sidecar, "wait_until_workflows_ready", None)
        if ready is not None:
            ready(app=app)

    def stop_app_worker(self, app: str) -> None:
        worker = self.app_workers.pop(app, None)
        if worker is not None:
            worker.stop()
            self.zombies += getattr(worker, "zombies_sent", lambda: [])()

    def stop_app_workers(self) -> None:
        for app in list(self.app_workers):
            self.stop_app_worker(app)

    def _stop_sidecar(self) -> None:
        self.sidecar.stop()

    def add_worker(self) -> None:
        """One more worker with the current programs beside the running ones (several workers, one engine)."""
        first = self.worker
        self.start_worker()
        self.more_workers.append(self.worker)
        self.worker = first

    def stop_more_workers(self) -> None:
        while self.more_workers:
            worker = self.more_workers.pop()
            worker.stop()
            self.zombies += getattr(worker, "zombies_sent", lambda: [])()

    def start_worker(self, *, programs: Mapping[str, Any] | None = None,
                     versions: Mapping[str, Sequence[str]] | None = None) -> None:
        from taskhub_programs import parse_bundle  # pure data module, no engine code

        if programs:
            self.bundle_doc = {**dict(self.run.scenario.programs_doc), **dict(programs)}
        if programs or versions:
            doc = dict(self.bundle_doc)
            for name, keep in (versions or {}).items():
                fam = dict(doc[name])
                fam["versions"] = {v: body for v, body in fam["versions"].items() if v in keep}
                if fam.get("default") not in fam["versions"]:
                    fam.pop("default", None)
                doc[name] = fam
            self.bundle_doc = doc
        self.bundle = parse_bundle({"programs": self.bundle_doc})
        bundle, bundle_doc = self.bundle, self.bundle_doc
        if self.run.scenario.apps:
            bundle, bundle_doc = self._app_bundle(self.run.scenario.apps[0].name)
        token = self.run.scenario.sidecar.get("api_token")
        self.worker = self.run.pair.worker.start(WorkerStart(
            address=self.proxy.address, bundle=bundle, bundle_doc=bundle_doc, work_dir=self.run.work_dir,
            ledger=self.ledger, adversary=tuple(self.run.scenario.worker.get("adversary") or ()), api_token=token,
            stateful_history=bool(self.run.scenario.worker.get("stateful_history", False)),
            history_cache_instances=self.run.scenario.worker.get("history_cache_instances"),
            max_message_bytes=self.run.scenario.engine.max_body_size))
        # Engines that only accept workflow calls once a worker is connected (daprd registers its
        # workflow actor types then) say so by this hook; the harness waits before the next step.
        ready = getattr(self.sidecar, "wait_until_workflows_ready", None)
        if ready is not None:
            ready()

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.zombies += getattr(self.worker, "zombies_sent", lambda: [])()
            self.worker = None


def _do_start(run: _Run, h: _Harness, spec: StartSpec) -> None:
    iid = spec.instance_id and str(run.subst(spec.instance_id)) or \
        f"{spec.name}-{run.scenario.id.rsplit('/', 1)[-1][:24]}-{uuid.uuid4().hex[:6]}"
    run.instances[spec.name] = iid
    req = pb.CreateInstanceRequest(instanceId=iid, name=spec.workflow)
    payload = _payload(run.subst(spec.input))
    if payload is not None:
        req.input.value = payload
    if spec.scheduled_in is not None:
        req.scheduledStartTimestamp.FromNanoseconds(time.time_ns() + int(spec.scheduled_in * 1e9))
    _rpc(run, h.app_client(spec.app), "StartInstance", req, expect=spec.expect_error,
         where=_Where(spec.span, f"start {spec.name}"), timeout=run.scenario.timeout)


@dataclass(frozen=True, kw_only=True)
class _At:
    """What every step handler gets besides its arguments: the run, its live pieces, the step."""

    run: _Run
    h: _Harness
    step: Step

    @property
    def where(self) -> _Where:
        return _Where(self.step.span, self.step.kind.name)

    @property
    def timeout(self) -> float:
        return self.run.scenario.timeout

    def rpc(self, rpc: str, request: Any) -> Any:
        return _rpc(self.run, self.h.client, rpc, request, expect=self.step.expect_error, where=self.where,
                    timeout=self.timeout)


def _on_start(at: _At, a: steps.Start) -> None:
    _do_start(at.run, at.h, a.spec(expect_error=at.step.expect_error, span=at.step.span))


def _on_wait(at: _At, a: steps.Wait) -> None:
    iid = at.run.iid(a.instance)
    _wait_status(at.h.client_for(iid), iid, list(a.statuses),
                 a.timeout if a.timeout is not None else at.timeout, where=at.where)


def _on_raise(at: _At, a: steps.Raise) -> None:
    req = pb.RaiseEventRequest(instanceId=at.run.iid(a.instance), name=a.event)
    payload = _payload(at.run.subst(a.data))
    if payload is not None:
        req.input.value = payload
    at.rpc("RaiseEvent", req)


def _on_suspend_or_resume(at: _At, a: steps.Suspend | steps.Resume) -> None:
    suspend = isinstance(a, steps.Suspend)
    req = (pb.SuspendRequest if suspend else pb.ResumeRequest)(instanceId=at.run.iid(a.instance))
    if a.reason:
        req.reason.value = a.reason
    at.rpc("SuspendInstance" if suspend else "ResumeInstance", req)


def _on_terminate(at: _At, a: steps.Terminate) -> None:
    req = pb.TerminateRequest(instanceId=at.run.iid(a.instance), recursive=a.recursive)
    payload = _payload(at.run.subst(a.output))
    if payload is not None:
        req.output.value = payload
    at.rpc("TerminateInstance", req)


def _on_purge(at: _At, a: steps.Purge) -> None:
    req = pb.PurgeInstancesRequest(instanceId=at.run.iid(a.instance), recursive=a.recursive)
    if a.force is not None:
        req.force = a.force
    at.rpc("PurgeInstances", req)


def _on_worker(at: _At, a: steps.RestartWorker | steps.StartWorker | steps.StopWorker) -> None:
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


def _on_add_worker(at: _At, a: steps.AddWorker) -> None:
    at.h.add_worker()


def _on_kill_sidecar(at: _At, a: steps.KillSidecar) -> None:
    at.h.sidecar.kill()


def _on_restart_sidecar(at: _At, a: steps.RestartSidecar) -> None:
    at.h.sidecar.restart()
    if at.h.sidecar.address != at.h.client.address:
        raise HarnessError(f"{at.where}: the sidecar came back on another address ({at.h.sidecar.address})")


def _on_advance_clock(at: _At, a: steps.AdvanceClock) -> None:
    engine = getattr(at.h.sidecar, "engine", None)
    if engine is None:
        raise HarnessError(f"{at.where}: sidecar {at.run.pair.sidecar.name} has no clock the harness can move")
    engine.advance_clock(a.seconds)


def _on_sleep(at: _At, a: steps.Sleep) -> None:
    time.sleep(a.seconds)  # the step's point is to let real time pass


def _on_call(at: _At, a: steps.Call) -> None:
    run, h = at.run, at.h
    table = TASKHUB if a.rpc in TASKHUB.methods else DAPR_WORKFLOW
    method = table.method(a.rpc)
    try:
        request = json_format.ParseDict(run.subst(dict(a.request)), method.request())
    except json_format.ParseError as exc:
        raise HarnessError(f"{at.where}: request is not a {method.request.DESCRIPTOR.name}: {exc}") from None
    from conformance.scenario.matching import Matcher

    # `within`: the scenario waits for a state (a new generation's input, a history entry) by asking
    # again until the response matches, not by sleeping a margin that a loaded machine can miss.
    deadline = None if a.within is None else time.monotonic() + a.within
    while True:
        resp = _raw_call(run, h.app_client(a.app), method, request, expect=at.step.expect_error, where=at.where,
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
            raise _step_failed(at.where, f"{at.where}: {method.name} response{waited}: " + "; ".join(mismatches))
        time.sleep(0.02)


def _on_release_replays(at: _At, a: steps.ReleaseReplays) -> None:
    at.h.proxy.replay_pending()


def _on_cut_streams(at: _At, a: steps.CutStreams) -> None:
    proxy = at.h.proxies.get(a.app) if a.app is not None else at.h.proxy
    if proxy is None:
        raise HarnessError(f"{at.where}: no app {a.app!r} in this scenario")
    proxy.cut_streams()


# One handler per argument class of the step registry (conformance/scenario/steps.py); a test checks
# that every kind has one.
HANDLERS: Mapping[type, Callable[[_At, Any], None]] = {
    steps.Start: _on_start, steps.Wait: _on_wait, steps.Raise: _on_raise, steps.Suspend: _on_suspend_or_resume,
    steps.Resume: _on_suspend_or_resume, steps.Terminate: _on_terminate, steps.Purge: _on_purge,
    steps.RestartWorker: _on_worker, steps.StartWorker: _on_worker, steps.StopWorker: _on_worker,
    steps.AddWorker: _on_add_worker,
    steps.KillSidecar: _on_kill_sidecar, steps.RestartSidecar: _on_restart_sidecar,
    steps.AdvanceClock: _on_advance_clock, steps.Sleep: _on_sleep, steps.Call: _on_call,
    steps.ReleaseReplays: _on_release_replays, steps.CutStreams: _on_cut_streams,
}


def _do_step(run: _Run, h: _Harness, step: Step) -> None:
    HANDLERS[type(step.args)](_At(run=run, h=h, step=step), step.args)


def _final_wait(run: _Run, h: _Harness) -> None:
    """Wait for every expected status to be reached (statuses are where the flow comes to rest)."""
    for key, exp in run.scenario.expect.items():
        if exp.status is None:
            continue
        iid = run.iid(key) if key in run.instances else str(run.subst(key))
        try:
            _wait_status(h.client_for(iid), iid, [exp.status], run.scenario.timeout, where=_Where(exp.span, "expect"))
        except TargetMisbehaved:
            return  # the expectations check reports the actual status, with every other mismatch


def _observe(run: _Run, h: _Harness, *, replay: Replayer | None) -> FlowObservation:
    ids = dict(run.instances)
    for key in run.scenario.expect:
        if key not in ids:
            ids[key] = str(run.subst(key))
    states: dict[str, Any] = {}
    raw: dict[str, list[Any]] = {}
    for iid in dict.fromkeys(ids.values()):
        client = h.client_for(iid)
        state = _state(client, iid)
        if state is not None:
            states[iid] = state
            raw[iid] = _history(client, iid)
    ledger = [json.loads(line) for line in h.ledger.read_text(encoding="utf-8").splitlines() if line.strip()]
    zombies = h.zombies + (getattr(h.worker, "zombies_sent", lambda: [])() if h.worker is not None else [])
    counters = h.sidecar.counters() if hasattr(h.sidecar, "counters") else {}
    # The history corpus (conformance/versions/corpus.py): only with $CONFORMANCE_RECORD_HISTORIES set.
    from conformance.versions.corpus import record_if_asked

    redeployed = any(getattr(st.args, "programs", None) or getattr(st.args, "versions", None) for st in run.scenario.steps)
    record_if_asked(scenario_id=run.scenario.id, kind="redeployed" if redeployed else run.scenario.kind.value,
                    programs_doc=run.scenario.programs_doc,
                    iids=raw, fetch=lambda iid: (h.client_for(iid).call(
                        "GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True),
                        timeout=10).workflowState, raw[iid]))
    return FlowObservation(scenario=run.scenario, instances=run.instances, keys=ids, states=states, replay=replay,
                    histories={k: [event_dict(e, with_router=bool(run.scenario.apps)) for e in v]
                               for k, v in raw.items()}, raw_histories=raw,
                    ledger=ledger, counters=counters, zombie_results=zombies, reproduce=run.reproduce,
                    engine=run.pair.sidecar.kind)


def _replayer(run: _Run, bundle: Any, stack: ExitStack) -> Replayer | None:
    """Replays turns on a fresh worker: in-process for the reference worker, else through a vector sidecar."""
    worker = run.pair.worker
    if worker.replayer is not None:
        return worker.replayer(bundle)
    from conformance.targets.reference import answer_dict, start_reference_sidecar

    holder: dict[str, Any] = {}

    def replay(iid: str, past: Sequence[Any], new: Sequence[Any]) -> dict[str, Any] | None:
        if "sidecar" not in holder:
            vec_dir = run.work_dir / "vectors"
            vec_dir.mkdir(exist_ok=True)
            sidecar = start_reference_sidecar(options={}, work_dir=vec_dir)
            stack.callback(sidecar.stop)
            holder["sidecar"] = sidecar
            handle = worker.start(WorkerStart(address=sidecar.address, bundle=bundle,
                                              bundle_doc=run.scenario.programs_doc, work_dir=vec_dir,
                                              ledger=vec_dir / "ledger.jsonl"))
            stack.callback(handle.stop)
        resp = holder["sidecar"].engine.inject_turn(instance_id=iid, past=past, new=new, timeout=30)
        return None if resp is None else answer_dict(resp)

    return replay


def run_scenario(scenario: Scenario, pair: Pair, *, work_root: Path | None = None, reproduce: str = "",
                 checks_only: Sequence[str] = (), capture: Callable[..., None] | None = None) -> ScenarioFinished:
    """Run `scenario` on `pair`; never raises for target misbehaviour (that is the outcome). `capture`,
    if given, is called once with what a flow scenario saw (`conformance engines-diff`): instances,
    observed (histories), calls (every client call with its answer) and transcript (the proxy's)."""
    began = time.monotonic()
    if pair.sidecar.engine.asked():  # the run's --engine-setting, under the scenario's own engine:
        scenario = replace(scenario, engine=scenario.engine.over(pair.sidecar.engine))
    missing = sorted(set(scenario.requires) - pair.capabilities)
    base = dict(scenario=scenario.id, pair=pair.label, sidecar=pair.sidecar.name, worker=pair.worker.name,
                requirements=scenario.requirements, title=scenario.title, reproduce=reproduce, source=scenario.source,
                started_at=time.time())
    unset = [s for s in scenario.engine.needed() if s.capability not in pair.sidecar.capabilities]
    if unset:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=0.0,
                                gap_reason=f"sidecar {pair.sidecar.name} cannot be started with engine setting"
                                           f"{'s' if len(unset) > 1 else ''} {', '.join(s.value for s in unset)} "
                                           f"(capabilit{'ies' if len(unset) > 1 else 'y'} "
                                           f"{', '.join(s.capability for s in unset)})", **base)
    if missing:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=0.0,
                                gap_reason=f"the pair lacks capabilit{'ies' if len(missing) > 1 else 'y'} "
                                           f"{', '.join(missing)}", **base)
    tmp = tempfile.mkdtemp(prefix="conformance-", dir=work_root)
    run = _Run(scenario=scenario, pair=pair, work_dir=Path(tmp), reproduce=reproduce)
    transcript: list[TranscriptEntry] = []
    logs: list[str] = []  # a process sidecar's own logs, named in a failure's message
    failures: list[TargetMisbehaved] = []
    error: str | None = None
    cannot: str | None = None
    obs = None
    with ExitStack() as stack:
        h: _Harness | None = None
        try:
            if scenario.kind is ScenarioKind.VECTOR:
                obs = _run_vector(run, stack)
            else:
                h = _Harness(run, stack)
                for spec in scenario.starts:
                    _do_start(run, h, spec)
                for step in scenario.steps:
                    _do_step(run, h, step)
                _final_wait(run, h)
                obs = _observe(run, h, replay=_replayer(run, h.bundle, stack))
            names = list(ALWAYS) + [c for c in scenario.checks if c not in ALWAYS]
            if scenario.kind is ScenarioKind.VECTOR:
                names = ["vector"] + [c for c in scenario.checks if c != "vector"]
            if checks_only:
                names = [n for n in names if n in checks_only]
            for name in names:
                try:
                    run_check(name, obs)
                except TargetMisbehaved as exc:
                    failures.append(exc)
        except TargetMisbehaved as exc:  # a step's own expectation (conformance.failures)
            failures.append(exc)
        except CannotExpress as exc:
            cannot = str(exc)
        except Exception as exc:  # noqa: BLE001 - the harness must report, not crash
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        finally:
            if h is not None:
                transcript = sorted([e for c in h.clients.values() for e in c.transcript]
                                    + [e for p in h.proxies.values() for e in p.transcript()], key=lambda e: e.t)
                logs = [str(p) for p in getattr(h.sidecar, "log_paths", ())]
                if capture is not None:
                    capture(instances=dict(run.instances), observed=obs, calls=list(h.client.calls),
                            transcript=list(h.proxy.transcript()))
    duration = time.monotonic() - began
    gap = pair.gap_for(scenario.id, scenario.requirements)
    if cannot is not None:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=duration, gap_reason=cannot,
                                transcript=tuple(transcript), **base)
    log_note = "".join(f"\nsidecar log: {p}" for p in logs)
    if error is not None or failures:  # what an SDK author needs beside the mismatches (conformance/failure_context.py)
        from conformance.failure_context import failure_context

        log_note += failure_context(scenario, worker=pair.worker.name, work_dir=run.work_dir, observed=obs,
                                    provenance=pair.worker.provenance)
    if error is not None:
        return ScenarioFinished(outcome=Outcome.ERROR, duration_s=duration, transcript=tuple(transcript),
                                message=f"{error}{log_note}\n{reproduce_line(reproduce)}", **base)
    return _verdict(scenario, failures, gap, duration=duration, transcript=tuple(transcript),
                    reproduce=reproduce, base=base, note=log_note)


def _verdict(scenario: Scenario, failures: Sequence[TargetMisbehaved], gap: Gap | None, *, duration: float,
             transcript: tuple[TranscriptEntry, ...], reproduce: str, base: Mapping[str, Any],
             note: str = "") -> ScenarioFinished:
    """The scenario's outcome from its mismatches: only a broken MUST fails (conformance.verdict)."""
    levels = requirement_levels()
    found = [(f.check, m) for f in failures for m in f.found]
    judged = judge([m for _, m in found], requirements=scenario.requirements, levels=levels)
    known = judged.outcome is Outcome.FAILED and gap is not None
    verdicts = tuple((rid, Outcome.KNOWN_FAILURE if known and v is Outcome.FAILED else v)
                     for rid, v in judged.per_requirement)
    observations = tuple((m.field or check, m.text) for check, m in found if m.level is Level.OBSERVATION)
    data = failures_of(judged, found, reproduce=reproduce)
    common = dict(duration_s=duration, transcript=transcript, verdicts=verdicts, broken=judged.broken,
                  observations=observations, failures=data, **base)
    if judged.outcome is Outcome.PASSED:
        # Only a gap narrowed to named scenarios can be judged by one scenario passing.
        passed_gap = gap is not None and bool(gap.scenarios)
        return ScenarioFinished(outcome=Outcome.PASSED, gap_passed=passed_gap,
                                gap_reason=f"declared gap {gap.requirement} passed here: narrow or remove it in the "
                                           "target's declaration" if passed_gap and gap else "", **common)
    message = render(data, sources=requirement_sources(), note=note, reproduce=reproduce)
    if known:
        assert gap is not None
        return ScenarioFinished(outcome=Outcome.KNOWN_FAILURE, message=message,
                                gap_reason=f"declared gap {gap.requirement}: {gap.reason}", **common)
    if judged.outcome is Outcome.FAILED:
        return ScenarioFinished(outcome=Outcome.FAILED, message=message, **common)
    outcome = Outcome.WARNING if judged.outcome is Outcome.WARNING else Outcome.OBSERVATION
    # A declared gap that now only warns or observes excuses nothing: say so, as for a passing gap.
    stale = gap is not None and bool(gap.scenarios)
    return ScenarioFinished(outcome=outcome, message=message, gap_passed=stale,
                            gap_reason=f"declared gap {gap.requirement} is no longer a MUST failure here: narrow or "
                                       "remove it in the target's declaration" if stale and gap else "", **common)


def _has_wait(node: Any) -> bool:
    """Whether program documents hold a wait_event step anywhere."""
    if isinstance(node, Mapping):
        return "wait_event" in node or any(_has_wait(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_wait(v) for v in node)
    return False


def _run_vector(run: _Run, stack: ExitStack) -> VectorObservation:
    """A turn-level vector: the reference sidecar hands the turn, in the worker's dialect, to the worker under test."""
    vec = run.scenario.vector
    assert vec is not None
    from taskhub_programs import parse_bundle

    from conformance.dialects.compare import engine_view, profile_for, relax
    from conformance.dialects.vectors import in_dialect

    bundle = parse_bundle({"programs": run.scenario.programs_doc})
    turn = in_dialect(vec, capabilities=run.pair.worker.capabilities, programs=run.scenario.programs_doc)
    replay = _replayer(run, bundle, stack)
    assert replay is not None
    answer = turn.to_reference(replay(turn.instance_id, list(turn.past), list(turn.new)))
    # Only what an engine applies is compared (default child ids, first completion wins, ...).
    expected = tuple(engine_view(list(turn.expected), vec.instance_id, wire=False))
    if answer is not None:
        answer = {**answer, "actions": engine_view(answer["actions"], vec.instance_id, wire=False)}
    if vec.compare is Compare.FUZZ:  # a regression vector: judged by the worker's profile, as a campaign would
        profile = profile_for(run.pair.worker.name, run.pair.worker.capabilities)
        expected = tuple(relax(p, profile, answer=False) for p in expected)
        if answer is not None:
            custom = answer.get("custom_status")
            answer = {**answer, "actions": [relax(a, profile, answer=True) for a in answer["actions"]],
                      "custom_status": None if custom == "" and profile.empty_custom_status_is_none else custom}
    # A fuzz finding's history was built from the reference's answers; in_dialect shifts ids and strips wait
    # timers for the worker, but a worker whose event waits take ids of their own (event_wait_ids) is never
    # sent such a history by an engine.
    # The same holds for a hand-written vector whose past records actions of a program with event waits: the
    # reference numbered them without ids for the waits, so the recorded ids do not line up for such a worker.
    own_wait_ids = "event_wait_ids" in run.pair.worker.capabilities
    waits_in_past = _has_wait(run.scenario.programs_doc) and any(
        e.WhichOneof("eventType") in PRODUCED_FIELDS and not e.HasField("executionCompleted") for e in turn.past)
    foreign = (own_wait_ids and (vec.compare is Compare.FUZZ or waits_in_past)) or vec.history is Reach.IMPOSSIBLE
    # A turn that delivers ExecutionTerminated ends the instance whatever the answer: the engine drops the
    # turn's actions and the termination wins over a continue-as-new (R3.16), so no answer differs there.
    terminated = terminates(turn.new)
    # A turn that leaves the instance suspended may be answered with no actions: the worker holds what the
    # events before the suspension let the code do until the resume (EVT-SUSP-001; durabletask-go does).
    held = suspended_after(turn.new, suspended=False)
    return VectorObservation(scenario=run.scenario, reproduce=run.reproduce, answer=answer, expected=expected,
                             note=turn.note, foreign=foreign, overridden=terminated, held=held)


__all__ = ["HarnessError", "run_scenario"]
