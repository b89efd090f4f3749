"""What a scenario run drives: the harness's client with its transcript, the run's names and ids, the
sidecar and workers it starts and stops, the calls it makes and the states it waits for."""

from __future__ import annotations

import functools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

from conformance.events import TranscriptEntry
from conformance.failures import TargetMisbehaved
from conformance.reporting.logs import adopt
from conformance.scenario.basics import MISSING, ErrorExpect, StartSpec
from conformance.scenario.model import Scenario
from conformance.scenario.placeholders import substitute
from conformance import stopping
from conformance.runner.isolation import claimer
from conformance.runner.slots import around_waits, waiting
from conformance.targets.base import CannotExpress, Pair, WorkerStart
from conformance.verdict import Mismatch, Subject

class HarnessError(Exception):
    """The scenario could not be run as written on this pair (an ERROR, not a conformance failure)."""

@dataclass(frozen=True)
class Where:
    """Where a step (or the final wait) is written: `file:line what`, and the span apart for its failures."""

    span: Any  # conformance.scenario.source.Span
    what: str

    def __str__(self) -> str:
        return f"{self.span} {self.what}"

def step_failed(where: Where, text: str, *, expected: str | None = None, got: str | None = None,
                 instance: str = "") -> TargetMisbehaved:
    """A step's own expectation did not hold (e.g. an RPC that should fail succeeded): the target misbehaved."""
    return TargetMisbehaved(check="step", mismatches=[Mismatch(text=text, location=str(where.span), expected=expected,
                                                               got=got, subject=Subject.STEP, instance=instance)])

def status_name(value: int) -> str:
    return pb.OrchestrationStatus.Name(value).removeprefix("ORCHESTRATION_STATUS_")

_POLL_S = 0.02  # between two reads of a sidecar that cannot say when it changed
_BACKSTOP_S = 0.5  # the longest a read waits for a change signal: a change it did not signal is seen then
_QUIET_S = 0.05  # no change for this long: the engine and worker are waiting as well


@dataclass
class Client:
    """The harness's client of the sidecar; every call lands in the transcript."""

    address: str
    metadata: tuple[tuple[str, str], ...]
    began: float
    transcript: list[TranscriptEntry] = field(default_factory=list)
    claim: Callable[[Any], None] = lambda request: None  # runner/isolation.py
    # The sidecar's change counter (fake_sidecar/engine/changes.py), where it runs in this process: a wait
    # reads again once something changed instead of every _POLL_S (see `Looks`).
    changes: Callable[[], Any] | None = None
    # Where the sidecar runs on engine time in this process: a wait that found the state unchanged and not
    # yet what it waits for lets the idle engine's clock jump on (ReferenceSidecar.allow_jump).
    allow_jump: Callable[[Any, int], None] | None = None
    # Every call with its answer, polls included (`conformance engines-diff` compares them; the
    # transcript leaves polls out): (t, rpc, request, response or None, "CODE: details" or None).
    calls: list[tuple[float, str, Any, Any, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Any answer size: an engine started with a larger max_body_size answers above gRPC's 4 MiB default.
        self.channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", -1)])
        self.client = TaskHubClient(self.channel, metadata=self.metadata)
        self.lock = threading.Lock()

    def call(self, rpc: str, request: Any, *, timeout: float) -> Any:
        stopping.check()  # an interrupted run: every scenario gives up at its next call
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

    def looks(self) -> "Looks":
        return Looks(self.changes, allow_jump=self.allow_jump)


class Looks:
    """Paces a wait that reads a sidecar's state until it matches: `mark()` before each read, `pause()`
    after one that did not match. With a change counter the pause lasts until the counter moved past
    the mark (a change during the read is not lost), at most _BACKSTOP_S; without one, _POLL_S."""

    def __init__(self, changes: Callable[[], Any] | None, *,
                 allow_jump: Callable[[Any, int], None] | None = None) -> None:
        self._changes = changes
        self._allow_jump = allow_jump
        self._mark: tuple[Any, int] | None = None

    def mark(self) -> None:
        if self._changes is not None:
            signal = self._changes()  # the running engine's: a restarted sidecar has a new one
            self._mark = (signal, signal.seq)

    def pause(self, remaining: float) -> None:
        if self._mark is None:
            time.sleep(_POLL_S)
            return
        signal, seq = self._mark
        longest = max(0.0, min(_BACKSTOP_S, remaining))
        if signal.wait_past(seq, timeout=min(_QUIET_S, longest)):
            return
        # Quiet: the pair waits too (a timer, an activity's sleep, a held message), so the scenario's
        # slot is free for the rest of the pause (conformance/runner/slots.py).
        with waiting():
            if self._allow_jump is not None:  # nothing changed since the read: time may pass, in engine time
                self._allow_jump(signal, seq)
            signal.wait_past(seq, timeout=longest - _QUIET_S)

@dataclass
class Run:
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

def payload_text(value: Any) -> str | None:
    return None if value is MISSING else json.dumps(value)

def expect_error(exc: grpc.RpcError, want: ErrorExpect, where: Where) -> None:
    code = exc.code().name
    if want.codes and code not in want.codes:
        raise step_failed(where, f"{where}: expected status {'/'.join(want.codes)}, got {code}: {exc.details()}",
                           expected="/".join(want.codes), got=code)
    if want.details and not re.search(want.details, exc.details() or ""):
        raise step_failed(where, f"{where}: status details {exc.details()!r} do not match /{want.details}/")

def call_rpc(run: Run, client: Client, rpc: str, request: Any, *, expect: ErrorExpect | None, where: Where,
         timeout: float, without_worker: bool = False) -> Any:
    """`without_worker`: the sidecar answers this call without the worker (StartInstance), so no answer
    within `timeout` is the sidecar or the machine being too slow, an ERROR, not the worker's failure."""
    try:
        resp = client.call(rpc, request, timeout=timeout)
    except grpc.RpcError as exc:
        if expect is not None:
            expect_error(exc, expect, where)
            return None
        if without_worker and exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
            raise HarnessError(f"{where}: the sidecar did not answer {rpc} within {timeout:g} s (DEADLINE_EXCEEDED); "
                               f"it answers {rpc} without the worker, so this is no verdict on the worker: the "
                               "sidecar or the machine is too slow (a loaded machine: rerun with fewer --jobs)") from None
        raise step_failed(where, f"{where}: {rpc} failed: {exc.code().name}: {exc.details()}") from None
    if expect is not None:
        raise step_failed(where, f"{where}: expected {rpc} to fail ({'/'.join(expect.codes) or 'non-OK'}"
                         f"{', details /' + expect.details + '/' if expect.details else ''}), but it succeeded")
    return resp

def call_raw(run: "Run", client: "Client", method: Any, request: Any, *, expect: ErrorExpect | None,
              where: Where, timeout: float, metadata: tuple[tuple[str, str], ...] | None) -> Any:
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
            expect_error(exc, expect, where)
            return None
        raise step_failed(where, f"{where}: {method.name} failed: {exc.code().name}: {exc.details()}") from None
    client._log(t, method.name, request, resp, None)
    client.calls.append((t, method.name, request, resp, None))
    if expect is not None:
        raise step_failed(where, f"{where}: expected {method.name} to fail ({'/'.join(expect.codes) or 'non-OK'}), "
                         "but it succeeded")
    return resp

def instance_state(client: Client, iid: str) -> dict[str, Any] | None:
    resp = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True), timeout=10)
    if not resp.exists:
        return None
    st = resp.workflowState
    out: dict[str, Any] = {"status": status_name(st.workflowStatus), "name": st.name}
    out["output"] = st.output.value if st.HasField("output") else None
    out["input"] = st.input.value if st.HasField("input") else None
    out["custom_status"] = st.customStatus.value if st.HasField("customStatus") else None
    if st.HasField("failureDetails"):
        out["failure"] = {"errorType": st.failureDetails.errorType, "errorMessage": st.failureDetails.errorMessage}
    return out

def instance_history(client: Client, iid: str) -> list[Any]:
    try:
        return list(client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid), timeout=10).events)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return []
        raise

def wait_status(client: Client, iid: str, wanted: Sequence[str], timeout: float, *, where: Where) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last = None
    failed: str | None = None
    looks = client.looks()
    while True:
        looks.mark()
        try:
            last, failed = instance_state(client, iid), None
        except grpc.RpcError as exc:
            # A poll that fails once is asked again (daprd 1.18.2 sometimes answers GetInstance during a
            # save with UNKNOWN "inbox key ... missing from state store"); one that keeps failing until
            # the deadline is the engine's failure, reported as such.
            failed = f"{exc.code().name}: {exc.details()}"
        if failed is None and last is not None and last["status"] in wanted:
            return last
        if time.monotonic() > deadline:
            if failed is not None:
                raise step_failed(where, f"{where}: GetInstance {iid} failed until the deadline: {failed}",
                                   instance=iid)
            got = "no such instance" if last is None else last["status"]
            why = ""
            if last and last.get("failure"):
                why = f" ({last['failure']['errorType']}: {last['failure']['errorMessage'][:200]})"
            raise step_failed(where, f"{where}: instance {iid} did not reach {'/'.join(wanted)} within {timeout:g}s; "
                                      f"it is {got}{why}", expected="/".join(wanted), got=got, instance=iid)
        looks.pause(deadline - time.monotonic())

@contextmanager
def _released(hold: Callable[[bool], None]) -> Iterator[None]:
    hold(False)
    try:
        yield
    finally:
        hold(True)

class Harness:
    """The live pieces of one run: sidecar, proxy, worker, client."""

    def __init__(self, run: Run, stack: ExitStack) -> None:
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
            # Per app, only where the scenario gives it (R11.11 scopes, R11.14 namespaces, R11.15 limits).
            for key, attr in (("policy_scopes", "policy_scopes"), ("app_namespaces", "namespace"),
                              ("app_body_limits", "max_body_size")):
                given = {app.name: getattr(app, attr) for app in sc.apps if getattr(app, attr) is not None}
                if given:
                    options[key] = given
        if sc.engine.asked():
            options["engine"] = sc.engine
        if run.pair.in_process:  # engine time: a `sleep` step or a sleeping activity jumps once the pair is idle
            options.setdefault("clock", "engine-time")
        self.sidecar = run.pair.sidecar.start(options=options, work_dir=run.work_dir)
        # The reference worker's activities sleep on engine time too, on the in-process pair.
        self.activity_sleep = getattr(self.sidecar, "sleep_in_flight", None) if run.pair.in_process else None
        stack.callback(self._stop_sidecar)
        hold = getattr(self.sidecar, "hold_clock", None)
        if hold is not None:  # a virtual clock jumps to the next timer only while the harness waits
            hold(True)
            stack.enter_context(around_waits(functools.partial(_released, hold)))
        from conformance.proxy import FaultProxy

        # Several apps: one proxy, client and worker per app, on that app's address (R11.1); the first
        # app's are `proxy`, `client` and `worker`, and the scenario's faults apply to its proxy.
        addresses = self._app_addresses()
        self.proxies: dict[str, Any] = {}
        self.clients: dict[str, Client] = {}
        token = sc.sidecar.get("api_token")
        for i, (app, address) in enumerate(addresses.items()):
            proxy = FaultProxy.start(upstream=address, rules=sc.faults if i == 0 else (), t0=run.began)
            adopt(proxy)  # its log lines (and tracebacks) go to this scenario's log
            stack.callback(proxy.stop)
            client = Client(address, (("dapr-api-token", token),) if token else (), run.began,
                             claim=claimer(proxy), changes=getattr(self.sidecar, "changes", None),
                             allow_jump=getattr(self.sidecar, "allow_jump", None) if run.pair.in_process else None)
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

    def app_client(self, app: str | None) -> Client:
        if app is None or not self.run.scenario.apps:
            return self.client
        if app not in self.clients:
            raise HarnessError(f"no app {app!r} in this scenario; its apps: {', '.join(self.clients)}")
        return self.clients[app]

    def client_for(self, iid: str, *, within: float = 0.0) -> Client:
        """The client of the app whose sidecar knows instance `iid` (each app sees only its own, R11.6);
        `within` seconds to look again while no app knows it yet (a child another app creates later)."""
        if len(self.clients) == 1:
            return self.client
        deadline = time.monotonic() + within
        looks = self.client.looks()
        while True:
            looks.mark()
            for client in self.clients.values():
                try:
                    if client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid), timeout=10).exists:
                        return client
                except grpc.RpcError:
                    continue
            if time.monotonic() >= deadline:
                return self.client
            looks.pause(deadline - time.monotonic())

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
                            max_message_bytes=self.run.scenario.engine.max_body_size, sleep=self.activity_sleep)
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
            max_message_bytes=self.run.scenario.engine.max_body_size, sleep=self.activity_sleep))
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

def do_start(run: Run, h: Harness, spec: StartSpec) -> None:
    iid = spec.instance_id and str(run.subst(spec.instance_id)) or \
        f"{spec.name}-{run.scenario.id.rsplit('/', 1)[-1][:24]}-{uuid.uuid4().hex[:6]}"
    run.instances[spec.name] = iid
    req = pb.CreateInstanceRequest(instanceId=iid, name=spec.workflow)
    payload = payload_text(run.subst(spec.input))
    if payload is not None:
        req.input.value = payload
    if spec.scheduled_in is not None:
        req.scheduledStartTimestamp.FromNanoseconds(time.time_ns() + int(spec.scheduled_in * 1e9))
    call_rpc(run, h.app_client(spec.app), "StartInstance", req, expect=spec.expect_error,
         where=Where(spec.span, f"start {spec.name}"), timeout=run.scenario.timeout, without_worker=True)
