"""Differential test: dapr-ext-workflow 1.18.3 ("dx", through its driver) vs the reference executor.

1. The example bundle runs on the reference sidecar with the reference worker (in-process): every
   program that needs no external input, and those that wait for events with the events fed.
2. After each instance finishes, its history (GetInstanceHistory) is cut at every WorkflowStarted
   event into (past, new) turn pairs. Each cut is compared in two forms:
   - "segment":    new = WorkflowStarted .. the next WorkflowStarted (the whole turn as recorded,
                   including the events the turn's own actions produced: TaskScheduled,
                   TimerCreated, ExecutionCompleted, ...). Replaying these checks that both workers
                   accept what was recorded (and agree on the completion at the end).
   - "dispatched": the same without those produced events: what the sidecar delivered for that
                   turn, so both workers must answer with the actions themselves.
   Turns that no final history holds are made from recorded ones ("derived", see GENERATIONS,
   TIMER_WINS, UNPATCHED): earlier continue-as-new generations, a timer firing instead of a fed
   event, and a history written before a patch.
3. The reference worker stops; the dx driver (drivers/dapr_ext_workflow/driver.py) starts as a
   separate process with the SDK's own virtualenv (.sdk/dx) against the same sidecar, and every
   pair is injected (`engine.inject_turn`) and compared with `execute(...)` of the reference
   executor on the same pair: actions (kind, id, names, JSON-decoded inputs/results, timer fireAt
   and origin, child instance ids, completion status, failure errorType, carry-over events), custom
   status, version name and patches, and fields our schema does not know.

Fields dx sets and the reference worker does not are listed in IGNORED and IGNORED_UNKNOWN (with the
reason); any other
difference must be listed in EXPECTED_DIFFERENCES (with the reason and both values) or the test
fails; an expected difference that no longer occurs fails too, so the table stays true.

The SDK never runs in this process: its generated protobuf modules would clash with ours.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest
import yaml

from conformance.dialects import compare
from fake_sidecar.server import SidecarServer
from fake_worker.activities import ActivityRunner
from fake_worker.client import Worker, WorkerOptions
from taskhub_programs import Bundle, load_bundle
from fake_worker.replay.executor import execute
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

pytestmark = pytest.mark.sdk

REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLE_PATH = REPO_ROOT / "taskhub_programs" / "examples" / "bundle.yaml"
DRIVER = REPO_ROOT / "drivers" / "dapr_ext_workflow" / "driver.py"
SDK_VENV = REPO_ROOT / ".sdk" / "dx"

RUN_TIMEOUT_S = 30  # per reference instance
DRIVER_START_TIMEOUT_S = 60
INJECT_TIMEOUT_S = 30
STOP_TIMEOUT_S = 20


# --------------------------------------------------------------------------- what runs


@dataclass(frozen=True)
class Run:
    label: str  # also the instance id suffix and the row of the summary
    workflow: str
    input: Any = None
    events: tuple[tuple[str, Any], ...] = ()  # raised right after the start, in order
    status: int = pb.ORCHESTRATION_STATUS_COMPLETED


RUNS: tuple[Run, ...] = (
    Run("chain", "chain", "a"),
    Run("fan_out_in", "fan_out_in"),
    Run("timers", "timers"),
    Run("event_timeout", "event_timeout", events=(("approve", "yes"),)),  # else a 30 s wait
    Run("event_wait", "event_wait", events=(("APPROVE", {"ok": True}),)),  # names match case-insensitively
    Run("child", "child", "x"),  # its child (a `chain` instance) is compared too, as "child>chain"
    Run("counter", "counter", 0),
    Run("retry", "retry"),
    Run("patched", "patched"),
    Run("status", "status"),
    Run("failing", "failing", "x", status=pb.ORCHESTRATION_STATUS_FAILED),
    Run("race", "race", events=(("go", 1),)),  # else a 60 s wait
    Run("versioned", "versioned", events=(("next", None),)),
    Run("recorded", "recorded", {"k": 1}),
)

# Turns no final history holds, made from recorded ones (form "derived"):
# - counter: a continued-as-new instance keeps only its last generation, so the first turn is
#   re-made with the inputs the earlier generations started with (each answers continue-as-new);
# - event_timeout, race: the events were fed to avoid 30 s / 60 s waits, so the turn that delivered
#   the event is re-made with the TimerFired of the wait's timer instead (timeout default, any's
#   timer branch);
# - patched: the later turns with the patch removed from every WorkflowStarted (a history written
#   by code before the patch: replay must take the else branch and report no patch).
GENERATIONS = {"counter": (0, 1, 2)}
TIMER_WINS = ("event_timeout", "race")
UNPATCHED = ("patched",)


def test_runs_cover_the_example_bundle() -> None:
    """Every program of the example bundle is run (a new program must be added to RUNS)."""
    bundle = load_bundle(BUNDLE_PATH)
    assert sorted(set(bundle.programs)) == sorted({r.workflow for r in RUNS})


# --------------------------------------------------------------------------- comparison rules

# Fields dx sets that the reference worker does not (dropped before comparing, by key name).
IGNORED: dict[str, str] = {
    "router": "dx sets an empty TaskRouter on scheduling actions (and a sourceAppID router on completions when "
    "the start event names an app); routing is not part of the program language and the reference worker "
    "sets none (docs/sdk-wire-behaviour.md §3.3)",
    "stackTrace": "failureDetails.stackTrace is the SDK's Python traceback text",
    "errorMessage": "failureDetails.errorMessage text may differ between implementations; errorType is compared",
}

# Fields our schema does not declare (it reserves these numbers: removed upstream), as
# "<message field>#<number>"; dx still sends them. Any other unknown field is a difference.
IGNORED_UNKNOWN: dict[str, str] = {
    "scheduleTask#4": "ScheduleTaskAction.router (field 4), an empty TaskRouter dx sets on every activity call; "
    "removed upstream, reserved in taskhub_wire",
    "createChildWorkflow#5": "CreateChildWorkflowAction.router (field 5), an empty TaskRouter dx sets on every child "
    "call; removed upstream, reserved in taskhub_wire",
}

# Keys whose (StringValue) values are JSON payloads, compared decoded.
PAYLOAD_KEYS = frozenset({"input", "result", "data", "reason"})


@dataclass(frozen=True)
class ExpectedDifference:
    """A known, explained difference: `path` in turns of `run` (and `form`, if given) has these values."""

    run: str
    path: str
    reference: Any
    dx: Any
    reason: str
    form: str | None = None  # "segment" | "dispatched" | "derived" | None (any)

    def matches(self, turn: "Turn", path: str, ref: Any, dx: Any) -> bool:
        return (self.run == turn.run and (self.form is None or self.form == turn.form) and self.path == path
                and self.reference == ref and self.dx == dx)


# Differences that remain after fixing what could be fixed; each one is asserted (values included).
EXPECTED_DIFFERENCES: tuple[ExpectedDifference, ...] = ()


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class Turn:
    run: str  # row label ("child>chain" for the child instance of run "child")
    form: str  # "segment" | "dispatched" | "derived"
    index: int  # which WorkflowStarted (1-based)
    instance_id: str
    past: tuple[pb.HistoryEvent, ...]
    new: tuple[pb.HistoryEvent, ...]
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.run} {self.form}#{self.index}{(' ' + self.note) if self.note else ''}"


# Events a turn's own actions produce (engine turns.py); never delivered to a worker.
PRODUCED = frozenset({"taskScheduled", "timerCreated", "childWorkflowInstanceCreated", "executionCompleted",
                      "eventSent", "detachedWorkflowInstanceCreated"})


def cut_turns(run: str, instance_id: str, history: list[pb.HistoryEvent]) -> list[Turn]:
    starts = [i for i, ev in enumerate(history) if ev.HasField("workflowStarted")]
    assert starts and starts[0] == 0, f"{instance_id}: history does not begin with WorkflowStarted"
    turns = []
    for n, begin in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(history)
        past, segment = tuple(history[:begin]), tuple(history[begin:end])
        turns.append(Turn(run, "segment", n + 1, instance_id, past, segment))
        delivered = segment[:1] + tuple(e for e in segment[1:] if e.WhichOneof("eventType") not in PRODUCED)
        # Produced events always follow the delivered ones (the engine appends them).
        first_produced = next((i for i, e in enumerate(segment) if i and e.WhichOneof("eventType") in PRODUCED),
                              len(segment))
        assert delivered == segment[:first_produced], f"{instance_id} turn {n + 1}: produced events interleaved"
        turns.append(Turn(run, "dispatched", n + 1, instance_id, past, delivered))
    return turns


def _copy(ev: pb.HistoryEvent) -> pb.HistoryEvent:
    out = pb.HistoryEvent()
    out.CopyFrom(ev)
    return out


def derived_generations(turns: list[Turn], inputs: tuple[Any, ...]) -> list[Turn]:
    """The first dispatched turn with another ExecutionStarted input (earlier continue-as-new generations)."""
    first = next(t for t in turns if t.form == "dispatched" and t.index == 1)
    out = []
    for value in inputs:
        new = [_copy(ev) for ev in first.new]
        for ev in new:
            if ev.HasField("executionStarted"):
                ev.executionStarted.input.value = json.dumps(value)
        out.append(Turn(first.run, "derived", 1, first.instance_id, first.past, tuple(new), note=f"input={value}"))
    return out


def derived_timer_wins(turns: list[Turn]) -> list[Turn]:
    """The dispatched turn that delivered an EventRaised, with the last real timer firing instead."""
    turn = next(t for t in turns if t.form == "dispatched" and any(e.HasField("eventRaised") for e in t.new))
    timer = [e for e in turn.past if e.HasField("timerCreated") and e.timerCreated.fireAt.seconds < 253402300799][-1]
    started = _copy(turn.new[0])
    started.timestamp.CopyFrom(timer.timerCreated.fireAt)
    fired = pb.HistoryEvent(eventId=-1)
    fired.timestamp.CopyFrom(timer.timerCreated.fireAt)
    fired.timerFired.timerId = timer.eventId
    fired.timerFired.fireAt.CopyFrom(timer.timerCreated.fireAt)
    rest = tuple(e for e in turn.new[1:] if not e.HasField("eventRaised"))
    return [Turn(turn.run, "derived", turn.index, turn.instance_id, turn.past, (started, fired) + rest,
                 note=f"timer {timer.eventId} fires instead of the event")]


def derived_unpatched(turns: list[Turn]) -> list[Turn]:
    """Every later dispatched turn with the patches dropped from the WorkflowStarted events."""

    def strip(events: tuple[pb.HistoryEvent, ...]) -> tuple[pb.HistoryEvent, ...]:
        out = []
        for ev in events:
            ev = _copy(ev)
            if ev.HasField("workflowStarted") and ev.workflowStarted.HasField("version"):
                del ev.workflowStarted.version.patches[:]
            out.append(ev)
        return tuple(out)

    return [Turn(t.run, "derived", t.index, t.instance_id, strip(t.past), strip(t.new), note="without patches")
            for t in turns if t.form == "dispatched" and t.index > 1]


# --------------------------------------------------------------------------- normalisation and diff
# The rules live in conformance/dialects/compare.py (the fuzzer compares SDK answers the same way); the
# reason tables above document them, and test_reason_tables_match_the_rules keeps the two in step.

diff = compare.diff
unknown_fields = compare.unknown_fields


def normalise(resp: pb.WorkflowResponse) -> dict[str, Any]:
    return {"instanceId": resp.instanceId, **compare.normalise(resp)}


def test_reason_tables_match_the_rules() -> None:
    assert set(IGNORED) == compare.IGNORED
    assert set(IGNORED_UNKNOWN) == compare.IGNORED_UNKNOWN
    assert PAYLOAD_KEYS == compare.PAYLOAD_KEYS


def messages(resp: pb.WorkflowResponse) -> list[str]:
    return [a.completeWorkflow.failureDetails.errorMessage for a in resp.actions
            if a.HasField("completeWorkflow") and a.completeWorkflow.HasField("failureDetails")]


# --------------------------------------------------------------------------- processes


def _sdk_python() -> Path:
    python = SDK_VENV / "bin" / "python"
    if not python.exists() or not (SDK_VENV / ".installed").exists():
        pytest.fail(f"SDK environment {SDK_VENV} is missing or incomplete: run scripts/install-sdks.sh dx",
                    pytrace=False)
    return python


@dataclass
class DriverProcess:
    proc: subprocess.Popen[str]
    lines: "queue.Queue[str | None]"
    stderr_path: Path

    def stderr_tail(self, n: int = 40) -> str:
        text = self.stderr_path.read_text(encoding="utf-8", errors="replace") if self.stderr_path.exists() else ""
        return "\n".join(text.rstrip().splitlines()[-n:]) or "(empty)"


def start_driver(*, sidecar: str, programs: Path, ledger: Path, stderr_path: Path) -> DriverProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DAPR_"))}
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    err = open(stderr_path, "w", encoding="utf-8")  # noqa: SIM115 - closed with the process below
    proc = subprocess.Popen(
        [str(_sdk_python()), str(DRIVER), "--sidecar", sidecar, "--programs", str(programs), "--ledger", str(ledger)],
        stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=str(REPO_ROOT))
    err.close()
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return DriverProcess(proc, lines, stderr_path)


def wait_connected(driver: DriverProcess, sidecar: str) -> None:
    deadline = time.monotonic() + DRIVER_START_TIMEOUT_S
    seen = []
    while time.monotonic() < deadline:
        try:
            line = driver.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            pytest.fail(f"the dx driver exited (rc={driver.proc.wait()}) before connecting; stdout: {seen}\n"
                        f"stderr:\n{driver.stderr_tail()}", pytrace=False)
        seen.append(line)
        if line == f"connected to {sidecar}":
            return
    pytest.fail(f"the dx driver did not print 'connected to {sidecar}' within {DRIVER_START_TIMEOUT_S}s; "
                f"stdout: {seen}\nstderr:\n{driver.stderr_tail()}", pytrace=False)


def stop_driver(driver: DriverProcess) -> int | None:
    """SIGTERM by pid, then SIGKILL after a timeout; returns the exit code of the clean stop (None if killed)."""
    if driver.proc.poll() is not None:
        return driver.proc.returncode
    driver.proc.send_signal(signal.SIGTERM)
    try:
        return driver.proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        driver.proc.kill()
        driver.proc.wait(timeout=STOP_TIMEOUT_S)
        return None


# --------------------------------------------------------------------------- the reference phase


@pytest.fixture
def sidecar() -> Iterator[SidecarServer]:
    server = SidecarServer.start(host="127.0.0.1", port=0, db=":memory:", clock="real")
    try:
        yield server
    finally:
        server.stop()


def run_reference(server: SidecarServer, bundle: Bundle, ledger: Path) -> dict[str, list[Turn]]:
    """Run every Run on the reference worker; return the recorded turns per summary row."""
    worker = Worker(bundle=bundle, options=WorkerOptions(sidecar=server.address),
                    activities=ActivityRunner(ledger=str(ledger)))
    thread = threading.Thread(target=worker.run, name="reference-worker", daemon=True)
    thread.start()
    channel = grpc.insecure_channel(server.address)
    client = TaskHubClient(channel)
    try:
        assert worker.connected_once.wait(15), "the reference worker did not connect"
        ids = {}
        for run in RUNS:
            iid = f"diff-{run.label}"
            req = pb.CreateInstanceRequest(instanceId=iid, name=run.workflow)
            if run.input is not None:
                req.input.value = json.dumps(run.input)
            client.call("StartInstance", req, timeout=RUN_TIMEOUT_S)
            for name, value in run.events:
                ev = pb.RaiseEventRequest(instanceId=iid, name=name)
                if value is not None:
                    ev.input.value = json.dumps(value)
                client.call("RaiseEvent", ev, timeout=RUN_TIMEOUT_S)
            ids[run.label] = iid
        for run in RUNS:
            got = client.call("WaitForInstanceCompletion", pb.GetInstanceRequest(instanceId=ids[run.label]),
                              timeout=RUN_TIMEOUT_S)
            status = got.workflowState.workflowStatus
            assert status == run.status, (f"reference run {run.label}: {pb.OrchestrationStatus.Name(status)}, "
                                          f"expected {pb.OrchestrationStatus.Name(run.status)}")
        # Every instance, children included, with the row of the run that started it.
        listed: list[str] = []
        page = client.call("ListInstanceIDs", pb.ListInstanceIDsRequest(), timeout=10)
        listed.extend(page.instanceIds)
        while page.HasField("continuationToken") and page.continuationToken:
            page = client.call("ListInstanceIDs", pb.ListInstanceIDsRequest(continuationToken=page.continuationToken),
                               timeout=10)
            listed.extend(page.instanceIds)
        assert {f"diff-{r.label}" for r in RUNS} <= set(listed), f"instances missing from ListInstanceIDs: {listed}"
        by_row: dict[str, list[Turn]] = defaultdict(list)
        for iid in listed:
            history = list(client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid),
                                       timeout=10).events)
            label = iid.split(":", 1)[0].removeprefix("diff-")
            started = next(e.executionStarted for e in history if e.HasField("executionStarted"))
            row = label if ":" not in iid else f"{label}>{started.name}"
            turns = cut_turns(row, iid, history)
            if row in GENERATIONS:
                turns += derived_generations(turns, GENERATIONS[row])
            if row in TIMER_WINS:
                turns += derived_timer_wins(turns)
            if row in UNPATCHED:
                turns += derived_unpatched(turns)
            by_row[row].extend(turns)
        return dict(by_row)
    finally:
        worker.stop()
        thread.join(15)
        channel.close()


# --------------------------------------------------------------------------- the test


@dataclass
class Outcome:
    turn: Turn
    diffs: list[tuple[str, Any, Any]]
    expected: list[ExpectedDifference]
    message_pairs: list[tuple[str, str]]
    ref_actions: list[str]


def test_dx_matches_reference_executor_turn_by_turn(sidecar: SidecarServer, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bundle = load_bundle(BUNDLE_PATH)
    ledger = tmp_path / "ledger.jsonl"
    turns_by_row = run_reference(sidecar, bundle, ledger)

    # The SDK venv has no PyYAML: hand the driver the same bundle as JSON.
    programs = tmp_path / "bundle.json"
    programs.write_text(json.dumps(yaml.safe_load(BUNDLE_PATH.read_text(encoding="utf-8"))), encoding="utf-8")
    driver = start_driver(sidecar=sidecar.address, programs=programs, ledger=ledger,
                          stderr_path=tmp_path / "driver.stderr")
    outcomes: list[Outcome] = []
    problems: list[str] = []
    try:
        wait_connected(driver, sidecar.address)
        for row, turns in turns_by_row.items():
            for turn in turns:
                ref = execute(bundle, instance_id=turn.instance_id, past=turn.past, new=turn.new)
                ref_resp = ref.response(instance_id=turn.instance_id, completion_token="")
                got = sidecar.engine.inject_turn(instance_id=turn.instance_id, past=turn.past, new=turn.new,
                                                 timeout=INJECT_TIMEOUT_S)
                if got is None:
                    problems.append(f"{turn.name}: dx did not answer within {INJECT_TIMEOUT_S}s")
                    continue
                found = diff(normalise(ref_resp), normalise(got))
                expected = []
                for path, a, b in found:
                    match = next((e for e in EXPECTED_DIFFERENCES if e.matches(turn, path, a, b)), None)
                    if match is None:
                        problems.append(f"{turn.name}: {path}: reference {a!r} != dx {b!r}")
                    else:
                        expected.append(match)
                outcomes.append(Outcome(turn, found, expected, list(zip(messages(ref_resp), messages(got))),
                                        [a.WhichOneof("workflowActionType") for a in ref_resp.actions]))
    finally:
        rc = stop_driver(driver)
    if rc != 0:
        problems.append(f"the dx driver did not stop cleanly on SIGTERM (exit {rc}); stderr:\n{driver.stderr_tail()}")

    used = {id(e) for o in outcomes for e in o.expected}
    for e in EXPECTED_DIFFERENCES:
        if id(e) not in used:
            problems.append(f"expected difference no longer occurs (remove it from the table): {e}")

    with capsys.disabled():  # the table is the point of the run: show it even when the test passes
        print_summary(outcomes)
    assert not problems, f"{len(problems)} unexplained difference(s) between dx and the reference executor:\n" + \
        "\n".join(f"  - {p}" for p in problems)


def print_summary(outcomes: list[Outcome]) -> None:
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        c = rows[o.turn.run]
        c[o.turn.form] += 1
        c["actions"] += len(o.ref_actions)
        c["equal"] += not o.diffs
        c["expected"] += bool(o.diffs) and len(o.expected) == len(o.diffs)
        c["unexplained"] += len(o.diffs) - len(o.expected) > 0
    header = f"{'program (row)':<18}{'segment':>8}{'dispatched':>11}{'derived':>8}{'actions':>8}{'equal':>7}" \
             f"{'expected':>9}{'unexplained':>12}"
    lines = ["", "dx (dapr-ext-workflow 1.18.3) vs reference executor, turns compared per row (actions: in the "
             "reference answers; equal: turns with no difference; expected: only listed differences):",
             header, "-" * len(header)]
    total: Counter[str] = Counter()
    for row in sorted(rows):
        c = rows[row]
        total.update(c)
        lines.append(f"{row:<18}{c['segment']:>8}{c['dispatched']:>11}{c['derived']:>8}{c['actions']:>8}"
                     f"{c['equal']:>7}{c['expected']:>9}{c['unexplained']:>12}")
    lines.append("-" * len(header))
    lines.append(f"{'total':<18}{total['segment']:>8}{total['dispatched']:>11}{total['derived']:>8}"
                 f"{total['actions']:>8}{total['equal']:>7}{total['expected']:>9}{total['unexplained']:>12}")
    differing = [(o.turn.name, a, b) for o in outcomes for a, b in o.message_pairs if a != b]
    if differing:
        lines.append("failure messages that differ (not compared, see IGNORED):")
        lines.extend(f"  {name}: reference {a!r} / dx {b!r}" for name, a, b in differing)
    print("\n".join(lines))


# --------------------------------------------------------------------------- testing the comparison and the driver


def _response(**changes: Any) -> pb.WorkflowResponse:
    resp = pb.WorkflowResponse(instanceId="i", completionToken="t")
    a = resp.actions.add(id=1)
    a.scheduleTask.name = "echo"
    a.scheduleTask.input.value = changes.get("input", '{"a": 1, "b": [1, 2]}')
    a.scheduleTask.taskExecutionId = "e"
    c = resp.actions.add(id=2)
    c.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_FAILED
    c.completeWorkflow.failureDetails.errorType = changes.get("error_type", "BusinessError")
    c.completeWorkflow.failureDetails.errorMessage = changes.get("message", "boom")
    if changes.get("router"):
        a.router.sourceAppID = "app"
    if changes.get("unknown"):
        raw = resp.SerializeToString() + changes["unknown"]
        resp = pb.WorkflowResponse.FromString(raw)
    if "status" in changes:
        resp.customStatus.value = changes["status"]
    return resp


@pytest.mark.parametrize(("changes", "paths"), [
    ({"input": '{"b":[1,2],"a":1}'}, []),  # JSON-decoded: formatting and key order do not count
    ({"router": True}, []),  # IGNORED
    ({"message": "other text"}, []),  # IGNORED
    ({"input": '{"a": 2, "b": [1, 2]}'}, ["actions[0].scheduleTask.input.json.a"]),
    ({"error_type": "TaskFailedError"}, ["actions[1].completeWorkflow.failureDetails.errorType"]),
    ({"status": "s"}, ["customStatus"]),
    # an unknown top-level field 7 (varint 1): reported, never dropped silently
    ({"unknown": bytes([7 << 3, 1])}, ["unknownFields.length", "unknownFields"]),
], ids=["json-equal", "router", "message", "input", "errorType", "customStatus", "unknown-field"])
def test_comparison_reports_what_matters(changes: dict[str, Any], paths: list[str]) -> None:
    found = diff(normalise(_response()), normalise(_response(**changes)))
    assert [p for p, _, _ in found] == paths


def test_comparison_ignores_only_the_reserved_router_fields() -> None:
    resp = _response()
    raw = resp.actions[0].scheduleTask.SerializeToString() + bytes([4 << 3 | 2, 0])  # ScheduleTaskAction.router {}
    resp.actions[0].scheduleTask.CopyFrom(pb.ScheduleTaskAction.FromString(raw))
    assert unknown_fields(resp) == ["actions[0].scheduleTask#4"]
    assert normalise(resp)["unknownFields"] == []


def _run_in_sdk_venv(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DAPR_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(DRIVER.parent)]), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([str(_sdk_python()), "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=str(REPO_ROOT), timeout=60)


_GAP_SCRIPT = """
import dataclasses, sys
import driver  # the dx adapter
import taskhub_programs as P
from drivers.python.driver import run

@dataclasses.dataclass(frozen=True)
class Signal:  # a step kind the driver predates
    target: str

program = P.Program(name="w", version="v1", steps=(P.Timer(duration=1.0),
                                                   P.If(cond=True, then=(Signal(target="x"),))))
bundle = P.Bundle(programs={"w": P.ProgramFamily(name="w", versions={"v1": program}, default="v1")})
P.load_bundle = lambda path: bundle
run(driver.DaprWorkflowAdapter, ["--sidecar", "127.0.0.1:1", "--programs", "unused.json"])
"""
_MAIN = "import sys, driver; from drivers.python.driver import run; run(driver.DaprWorkflowAdapter, sys.argv[1:])"


def test_driver_refuses_a_step_it_cannot_express() -> None:
    done = _run_in_sdk_venv(_GAP_SCRIPT)
    assert done.returncode == 3, done.stderr
    assert "cannot express" in done.stderr
    assert "$.programs.w.versions.v1.steps[1].if.then[0]: step kind 'Signal'" in done.stderr
    assert "connected to" not in done.stdout


def test_driver_reports_bundle_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"programs": {"w": {"steps": [{"timer": "soon"}]}}}), encoding="utf-8")
    done = _run_in_sdk_venv(_MAIN,
                            "--sidecar", "127.0.0.1:1", "--programs", str(bad))
    assert done.returncode == 2, done.stderr
    assert "$.programs.w.steps[0].timer.duration" in done.stderr
    as_yaml = tmp_path / "bundle.yaml"
    as_yaml.write_text(BUNDLE_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    done = _run_in_sdk_venv(_MAIN,
                            "--sidecar", "127.0.0.1:1", "--programs", str(as_yaml))
    if "PyYAML is not installed" in done.stderr:  # the .sdk/dx venv (drivers/sdk_envs/dx.txt) has no PyYAML
        assert done.returncode == 2 and "pass the bundle as .json" in done.stderr
