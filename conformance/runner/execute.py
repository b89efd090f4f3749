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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, TaskHubClient

from conformance.checks import ALWAYS, CHECKS, ConformanceFailure, Observed
from conformance.events import Outcome, ScenarioFinished, TranscriptEntry
from conformance.reporting.logs import adopt
from conformance.scenario.model import MISSING, ErrorExpect, Scenario, StartSpec, Step
from conformance.scenario.wire import event_dict, message_dict
from conformance.runner.isolation import claimer
from conformance.targets.base import CannotExpress, Gap, Pair, Replayer, WorkerStart
from conformance.verdict import Judgement, Level, Verdict, judge


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


class StepFailed(Exception):
    """A step's own expectation did not hold (e.g. an RPC that should fail succeeded)."""


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

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.address)
        self.client = TaskHubClient(self.channel, metadata=self.metadata)
        self.lock = threading.Lock()

    def call(self, rpc: str, request: Any, *, timeout: float) -> Any:
        t = time.monotonic() - self.began
        self.claim(request)
        try:
            resp = self.client.call(rpc, request, timeout=timeout)
        except grpc.RpcError as exc:
            self._log(t, rpc, request, None, f"{exc.code().name}: {exc.details()}")
            raise
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
        """`${name}` placeholders -> instance ids, recursively in strings."""
        if isinstance(value, str):
            whole = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value)
            if whole and whole.group(1) in self.vars and whole.group(1) not in self.instances:
                return self.vars[whole.group(1)]  # a captured value keeps its type
            known = {**{k: str(v) for k, v in self.vars.items()}, **self.instances}
            return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: known.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [self.subst(v) for v in value]
        if isinstance(value, Mapping):
            return {k: self.subst(v) for k, v in value.items()}
        return value

    def iid(self, name: Any) -> str:
        name = str(name or "main")
        if name in self.instances:
            return self.instances[name]
        return str(self.subst(name))


def _payload(value: Any) -> str | None:
    return None if value is MISSING else json.dumps(value)


def _expect_error(exc: grpc.RpcError, want: ErrorExpect, where: str) -> None:
    code = exc.code().name
    if want.codes and code not in want.codes:
        raise StepFailed(f"{where}: expected status {'/'.join(want.codes)}, got {code}: {exc.details()}")
    if want.details and not re.search(want.details, exc.details() or ""):
        raise StepFailed(f"{where}: status details {exc.details()!r} do not match /{want.details}/")


def _rpc(run: _Run, client: _Client, rpc: str, request: Any, *, expect: ErrorExpect | None, where: str,
         timeout: float) -> Any:
    try:
        resp = client.call(rpc, request, timeout=timeout)
    except grpc.RpcError as exc:
        if expect is not None:
            _expect_error(exc, expect, where)
            return None
        raise StepFailed(f"{where}: {rpc} failed: {exc.code().name}: {exc.details()}") from None
    if expect is not None:
        raise StepFailed(f"{where}: expected {rpc} to fail ({'/'.join(expect.codes) or 'non-OK'}"
                         f"{', details /' + expect.details + '/' if expect.details else ''}), but it succeeded")
    return resp


def _raw_call(run: "_Run", h: "_Harness", method: Any, request: Any, *, expect: ErrorExpect | None, where: str,
              timeout: float, metadata: tuple[tuple[str, str], ...] | None) -> Any:
    """Any RPC of either service on the sidecar, optionally with exactly the given metadata."""
    call = h.client.channel.unary_unary(method.path, request_serializer=method.request.SerializeToString,
                                         response_deserializer=method.response.FromString)
    t = time.monotonic() - run.began
    h.client.claim(request)
    try:
        resp = call(request, timeout=timeout, metadata=h.client.metadata if metadata is None else metadata)
    except grpc.RpcError as exc:
        h.client._log(t, method.name, request, None, f"{exc.code().name}: {exc.details()}")
        if expect is not None:
            _expect_error(exc, expect, where)
            return None
        raise StepFailed(f"{where}: {method.name} failed: {exc.code().name}: {exc.details()}") from None
    h.client._log(t, method.name, request, resp, None)
    if expect is not None:
        raise StepFailed(f"{where}: expected {method.name} to fail ({'/'.join(expect.codes) or 'non-OK'}), "
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


def _wait_status(client: _Client, iid: str, wanted: Sequence[str], timeout: float, *, where: str) -> dict[str, Any]:
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
                raise StepFailed(f"{where}: GetInstance {iid} failed until the deadline: {failed}")
            got = "no such instance" if last is None else last["status"]
            why = ""
            if last and last.get("failure"):
                why = f" ({last['failure']['errorType']}: {last['failure']['errorMessage'][:200]})"
            raise StepFailed(f"{where}: instance {iid} did not reach {'/'.join(wanted)} within {timeout:g}s; "
                             f"it is {got}{why}")
        time.sleep(0.02)


class _Harness:
    """The live pieces of one run: sidecar, proxy, worker, client."""

    def __init__(self, run: _Run, stack: ExitStack) -> None:
        self.run = run
        self.stack = stack
        sc = run.scenario
        self.ledger = run.work_dir / "ledger.jsonl"
        self.ledger.touch()
        self.sidecar = run.pair.sidecar.start(options=sc.sidecar, work_dir=run.work_dir)
        stack.callback(self._stop_sidecar)
        from conformance.proxy import FaultProxy

        self.proxy = FaultProxy.start(upstream=self.sidecar.address, rules=sc.faults, t0=run.began)
        adopt(self.proxy)  # its log lines (and tracebacks) go to this scenario's log
        stack.callback(self.proxy.stop)
        token = sc.sidecar.get("api_token")
        self.client = _Client(self.sidecar.address, (("dapr-api-token", token),) if token else (), run.began,
                              claim=claimer(self.proxy))
        stack.callback(self.client.close)
        self.bundle, self.bundle_doc = sc.programs, dict(sc.programs_doc)
        self.worker = None
        self.zombies: list[str] = []
        self.start_worker()
        stack.callback(self.stop_worker)

    def _stop_sidecar(self) -> None:
        self.sidecar.stop()

    def start_worker(self, *, programs: Mapping[str, Any] | None = None,
                     versions: Mapping[str, Sequence[str]] | None = None) -> None:
        from fake_worker.programs import parse_bundle  # pure data module, no engine code

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
        token = self.run.scenario.sidecar.get("api_token")
        self.worker = self.run.pair.worker.start(WorkerStart(
            address=self.proxy.address, bundle=self.bundle, bundle_doc=self.bundle_doc, work_dir=self.run.work_dir,
            ledger=self.ledger, adversary=tuple(self.run.scenario.worker.get("adversary") or ()), api_token=token))
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
    _rpc(run, h.client, "StartInstance", req, expect=spec.expect_error, where=f"{spec.span} start {spec.name}",
         timeout=run.scenario.timeout)


def _do_step(run: _Run, h: _Harness, step: Step) -> None:
    a = step.args
    where = f"{step.span} {step.kind}"
    timeout = run.scenario.timeout
    if step.kind == "start":
        from fake_worker.programs import parse_duration

        spec = StartSpec(name=str(a.get("as", "main")), workflow=str(a["workflow"]), input=a.get("input", MISSING),
                         scheduled_in=parse_duration(a["scheduled_in"]) if "scheduled_in" in a else None,
                         instance_id=a.get("instance_id"), expect_error=step.expect_error, span=step.span)
        _do_start(run, h, spec)
    elif step.kind == "wait":
        from fake_worker.programs import parse_duration

        wanted = [a["status"]] if isinstance(a["status"], str) else list(a["status"])
        _wait_status(h.client, run.iid(a.get("instance")), wanted,
                     parse_duration(a["timeout"]) if "timeout" in a else timeout, where=where)
    elif step.kind == "raise":
        req = pb.RaiseEventRequest(instanceId=run.iid(a.get("instance")), name=str(a["event"]))
        payload = _payload(run.subst(a.get("data", MISSING)))
        if payload is not None:
            req.input.value = payload
        _rpc(run, h.client, "RaiseEvent", req, expect=step.expect_error, where=where, timeout=timeout)
    elif step.kind in ("suspend", "resume"):
        cls = pb.SuspendRequest if step.kind == "suspend" else pb.ResumeRequest
        req = cls(instanceId=run.iid(a.get("instance")))
        if a.get("reason"):
            req.reason.value = str(a["reason"])
        _rpc(run, h.client, "SuspendInstance" if step.kind == "suspend" else "ResumeInstance", req,
             expect=step.expect_error, where=where, timeout=timeout)
    elif step.kind == "terminate":
        req = pb.TerminateRequest(instanceId=run.iid(a.get("instance")), recursive=bool(a.get("recursive", False)))
        payload = _payload(run.subst(a.get("output", MISSING)))
        if payload is not None:
            req.output.value = payload
        _rpc(run, h.client, "TerminateInstance", req, expect=step.expect_error, where=where, timeout=timeout)
    elif step.kind == "purge":
        req = pb.PurgeInstancesRequest(instanceId=run.iid(a.get("instance")), recursive=bool(a.get("recursive", False)))
        if "force" in a:
            req.force = bool(a["force"])
        _rpc(run, h.client, "PurgeInstances", req, expect=step.expect_error, where=where, timeout=timeout)
    elif step.kind in ("restart_worker", "start_worker", "stop_worker"):
        if step.kind != "start_worker":
            h.stop_worker()
        if step.kind != "stop_worker":
            h.start_worker(programs=a.get("programs"), versions=a.get("versions"))
    elif step.kind == "kill_sidecar":
        h.sidecar.kill()
    elif step.kind == "restart_sidecar":
        h.sidecar.restart()
        if h.sidecar.address != h.client.address:
            raise HarnessError(f"{where}: the sidecar came back on another address ({h.sidecar.address})")
    elif step.kind == "advance_clock":
        from fake_worker.programs import parse_duration

        engine = getattr(h.sidecar, "engine", None)
        if engine is None:
            raise HarnessError(f"{where}: sidecar {run.pair.sidecar.name} has no clock the harness can move")
        engine.advance_clock(parse_duration(a["by"]))
    elif step.kind == "sleep":
        from fake_worker.programs import parse_duration

        time.sleep(parse_duration(a["for"]))
    elif step.kind == "call":
        table = TASKHUB if str(a["rpc"]) in TASKHUB.methods else DAPR_WORKFLOW
        method = table.method(str(a["rpc"]))
        try:
            request = json_format.ParseDict(run.subst(a.get("request") or {}), method.request())
        except json_format.ParseError as exc:
            raise HarnessError(f"{where}: request is not a {method.request.DESCRIPTOR.name}: {exc}") from None
        expect = a.get("expect") or {}
        metadata = None if "metadata" not in a else tuple((str(k), str(v)) for k, v in a["metadata"].items())
        resp = _raw_call(run, h, method, request, expect=step.expect_error, where=where, timeout=timeout,
                         metadata=metadata)
        if resp is not None and expect.get("response") is not None:
            from conformance.scenario.matching import Matcher

            got = message_dict(resp)
            matcher = Matcher(captures=dict(run.vars))
            mismatches = matcher.match(run.subst(expect["response"]), got, "$")
            if mismatches:
                raise StepFailed(f"{where}: {method.name} response: " + "; ".join(mismatches))
            run.vars.update(matcher.captures)  # `${NAME}` captured here can be used by later steps
    elif step.kind == "release_replays":
        h.proxy.replay_pending()
    elif step.kind == "cut_streams":
        h.proxy.cut_streams()
    else:  # pragma: no cover - the loader rejects unknown kinds
        raise HarnessError(f"{where}: unknown step kind {step.kind}")


def _final_wait(run: _Run, h: _Harness) -> None:
    """Wait for every expected status to be reached (statuses are where the flow comes to rest)."""
    for key, exp in run.scenario.expect.items():
        if exp.status is None:
            continue
        iid = run.iid(key) if key in run.instances else str(run.subst(key))
        try:
            _wait_status(h.client, iid, [exp.status], run.scenario.timeout, where=f"{exp.span} expect")
        except StepFailed:
            return  # the expectations check reports the actual status, with every other mismatch


def _observe(run: _Run, h: _Harness) -> Observed:
    ids = dict(run.instances)
    for key in run.scenario.expect:
        if key not in ids:
            ids[key] = str(run.subst(key))
    states: dict[str, Any] = {}
    raw: dict[str, list[Any]] = {}
    for iid in dict.fromkeys(ids.values()):
        state = _state(h.client, iid)
        if state is not None:
            states[iid] = state
            raw[iid] = _history(h.client, iid)
    ledger = [json.loads(line) for line in h.ledger.read_text(encoding="utf-8").splitlines() if line.strip()]
    zombies = h.zombies + (getattr(h.worker, "zombies_sent", lambda: [])() if h.worker is not None else [])
    counters = h.sidecar.counters() if hasattr(h.sidecar, "counters") else {}
    return Observed(scenario=run.scenario, instances=run.instances, keys=ids, states=states,
                    histories={k: [event_dict(e) for e in v] for k, v in raw.items()}, raw_histories=raw,
                    ledger=ledger, counters=counters, zombie_results=zombies, reproduce=run.reproduce)


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
                 checks_only: Sequence[str] = ()) -> ScenarioFinished:
    """Run `scenario` on `pair`; never raises for target misbehaviour (that is the outcome)."""
    began = time.monotonic()
    missing = sorted(set(scenario.requires) - pair.capabilities)
    base = dict(scenario=scenario.id, pair=pair.label, sidecar=pair.sidecar.name, worker=pair.worker.name,
                requirements=scenario.requirements, title=scenario.title, reproduce=reproduce, source=scenario.source)
    if missing:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=0.0,
                                gap_reason=f"the pair lacks capabilit{'ies' if len(missing) > 1 else 'y'} "
                                           f"{', '.join(missing)}", **base)
    tmp = tempfile.mkdtemp(prefix="conformance-", dir=work_root)
    run = _Run(scenario=scenario, pair=pair, work_dir=Path(tmp), reproduce=reproduce)
    transcript: list[TranscriptEntry] = []
    logs: list[str] = []  # a process sidecar's own logs, named in a failure's message
    failures: list[ConformanceFailure] = []
    error: str | None = None
    cannot: str | None = None
    with ExitStack() as stack:
        h: _Harness | None = None
        try:
            if scenario.kind == "vector":
                obs = _run_vector(run, stack)
            else:
                h = _Harness(run, stack)
                for spec in scenario.starts:
                    _do_start(run, h, spec)
                for step in scenario.steps:
                    _do_step(run, h, step)
                _final_wait(run, h)
                obs = _observe(run, h)
                obs.replay = _replayer(run, h.bundle, stack)
            names = list(ALWAYS) + [c for c in scenario.checks if c not in ALWAYS]
            if scenario.kind == "vector":
                names = ["vector"] + [c for c in scenario.checks if c != "vector"]
            if checks_only:
                names = [n for n in names if n in checks_only]
            for name in names:
                try:
                    CHECKS[name](obs)
                except ConformanceFailure as exc:
                    failures.append(exc)
        except StepFailed as exc:
            failures.append(ConformanceFailure(check="step", mismatches=[str(exc)]))
        except CannotExpress as exc:
            cannot = str(exc)
        except Exception as exc:  # noqa: BLE001 - the harness must report, not crash
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        finally:
            if h is not None:
                transcript = sorted(h.client.transcript + list(h.proxy.transcript()), key=lambda e: e.t)
                logs = [str(p) for p in getattr(h.sidecar, "log_paths", ())]
    duration = time.monotonic() - began
    gap = pair.gap_for(scenario.id, scenario.requirements)
    if cannot is not None:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=duration, gap_reason=cannot,
                                transcript=tuple(transcript), **base)
    log_note = "".join(f"\nsidecar log: {p}" for p in logs)
    if error is not None:
        return ScenarioFinished(outcome=Outcome.ERROR, duration_s=duration, transcript=tuple(transcript),
                                message=f"{error}{log_note}\nReproduce with: {reproduce}", **base)
    return _verdict(scenario, failures, gap, duration=duration, transcript=tuple(transcript),
                    reproduce=reproduce, base=base, note=log_note)


def _verdict(scenario: Scenario, failures: Sequence[ConformanceFailure], gap: Gap | None, *, duration: float,
             transcript: tuple[TranscriptEntry, ...], reproduce: str, base: Mapping[str, Any],
             note: str = "") -> ScenarioFinished:
    """The scenario's outcome from its mismatches: only a broken MUST fails (conformance.verdict)."""
    levels = requirement_levels()
    found = [m for f in failures for m in f.found]
    judged = judge(found, requirements=scenario.requirements, levels=levels)
    known = judged.outcome is Verdict.FAILED and gap is not None
    verdicts = tuple((rid, Outcome.KNOWN_FAILURE.value if known and v is Verdict.FAILED else v.value)
                     for rid, v in judged.per_requirement)
    observations = tuple((m.field or f.check, m.text) for f in failures for m in f.found
                         if m.level is Level.OBSERVATION)
    common = dict(duration_s=duration, transcript=transcript, verdicts=verdicts, broken=judged.broken,
                  observations=observations, **base)
    if judged.outcome is Verdict.PASSED:
        # Only a gap narrowed to named scenarios can be judged by one scenario passing.
        passed_gap = gap is not None and bool(gap.scenarios)
        return ScenarioFinished(outcome=Outcome.PASSED, gap_passed=passed_gap,
                                gap_reason=f"declared gap {gap.requirement} passed here: narrow or remove it in the "
                                           "target's declaration" if passed_gap and gap else "", **common)
    message = _render(judged, failures) + f"{note}\n\nReproduce with: {reproduce}"
    if known:
        assert gap is not None
        return ScenarioFinished(outcome=Outcome.KNOWN_FAILURE, message=message,
                                gap_reason=f"declared gap {gap.requirement}: {gap.reason}", **common)
    if judged.outcome is Verdict.FAILED:
        return ScenarioFinished(outcome=Outcome.FAILED, message=message, **common)
    outcome = Outcome.WARNING if judged.outcome is Verdict.WARNING else Outcome.OBSERVATION
    # A declared gap that now only warns or observes excuses nothing: say so, as for a passing gap.
    stale = gap is not None and bool(gap.scenarios)
    return ScenarioFinished(outcome=outcome, message=message, gap_passed=stale,
                            gap_reason=f"declared gap {gap.requirement} is no longer a MUST failure here: narrow or "
                                       "remove it in the target's declaration" if stale and gap else "", **common)


def _render(judged: Judgement, failures: Sequence[ConformanceFailure]) -> str:
    """Worst first: what is broken (with the requirement and where the contract says so), then what differs."""
    sources = requirement_sources()
    check_of = {m.text: f.check for f in failures for m in f.found}
    blocks = []
    for section in judged.sections:
        lines = [section.heading]
        if section.verdict is Verdict.FAILED:  # where the contract says so
            lines += [f"  {rid}: {sources[rid]}" for rid in section.requirements if rid in sources]
        lines += [f"  - [{check_of.get(t, 'check')}] {t}" for t in section.texts]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


_ACTION_EVENTS = frozenset({"taskScheduled", "timerCreated", "childWorkflowInstanceCreated", "eventSent",
                            "detachedWorkflowInstanceCreated"})


def _has_wait(node: Any) -> bool:
    """Whether program documents hold a wait_event step anywhere."""
    if isinstance(node, Mapping):
        return "wait_event" in node or any(_has_wait(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_wait(v) for v in node)
    return False


def _run_vector(run: _Run, stack: ExitStack) -> Observed:
    """A turn-level vector: the reference sidecar hands the turn, in the worker's dialect, to the worker under test."""
    vec = run.scenario.vector
    assert vec is not None
    from fake_worker.programs import parse_bundle

    from conformance.fuzz.compare import engine_view, profile_for, relax
    from conformance.runner.vector_dialect import in_dialect

    bundle = parse_bundle({"programs": run.scenario.programs_doc})
    turn = in_dialect(vec, capabilities=run.pair.worker.capabilities, programs=run.scenario.programs_doc)
    replay = _replayer(run, bundle, stack)
    assert replay is not None
    answer = turn.to_reference(replay(turn.instance_id, list(turn.past), list(turn.new)))
    # Only what an engine applies is compared (default child ids, first completion wins, ...).
    expected = tuple(engine_view(list(turn.expected), vec.instance_id, wire=False))
    if answer is not None:
        answer = {**answer, "actions": engine_view(answer["actions"], vec.instance_id, wire=False)}
    if vec.compare == "fuzz":  # a regression vector: judged by the worker's profile, as a campaign would
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
        e.WhichOneof("eventType") in _ACTION_EVENTS for e in turn.past)
    foreign = (own_wait_ids and (vec.compare == "fuzz" or waits_in_past)) or vec.history == "impossible"
    # A turn that delivers ExecutionTerminated ends the instance whatever the answer: the engine drops the
    # turn's actions and the termination wins over a continue-as-new (R3.16), so no answer differs there.
    terminated = any(e.WhichOneof("eventType") == "executionTerminated" for e in turn.new)
    # A turn that leaves the instance suspended may be answered with no actions: the worker holds what the
    # events before the suspension let the code do until the resume (EVT-SUSP-001; durabletask-go does).
    markers = [e.WhichOneof("eventType") for e in turn.new
               if e.WhichOneof("eventType") in ("executionSuspended", "executionResumed")]
    held = bool(markers) and markers[-1] == "executionSuspended"
    return Observed(scenario=run.scenario, instances={}, states={}, histories={}, reproduce=run.reproduce,
                    vector_answer=answer, vector_expected=expected, vector_note=turn.note, vector_foreign=foreign,
                    vector_overridden=terminated, vector_held=held)


__all__ = ["HarnessError", "run_scenario"]
