"""A hand-made run for the report tests: 2 pairs, 7 scenarios, every outcome, transcripts with faults.

Expected matrix (requirement x pair; REF = reference+reference, GO = durabletask-go+dapr-python):

    ACT-ALO-001  MUST    REF passed              GO FAILED (at-least-once failed, stale-token gap)
    ACT-TOK-002  MUST    REF passed              GO not implemented
    RPL-DET-001  MUST    REF passed              GO passed (a 200-message transcript)
    RPL-PAT-002  SHOULD  REF passed (gap passed) GO ERROR
    PAY-SIZ-001  MAY     REF passed              GO not applicable
    TMR-FIR-001  SHOULD  uncovered               uncovered
    XTR-UNK-001  (not in the catalogue) REF passed, GO uncovered
"""

from __future__ import annotations

from conformance.events import Event, Outcome, RunFinished, RunStarted, ScenarioFinished, ScenarioStarted, TranscriptEntry

REF = "reference+reference"
GO = "durabletask-go+dapr-python"
RUN_ID = "20250101T120000-3f2a"
STARTED_AT = 1735732800.0  # 2025-01-01T12:00:00Z
COMMAND = "python -m conformance run scenarios/ --pair reference+reference --pair durabletask-go+dapr-python"

CATALOGUE_YAML = """\
requirements:
  - id: ACT-ALO-001
    title: Activities are delivered at least once
    text: An activity whose completion is lost is dispatched again until a completion is accepted.
    level: MUST
    area: activities
    applies_to: engine
    source: "seed 000 §活动生命周期; engine-rules R4.6"
  - id: ACT-TOK-002
    title: A completion with a stale token is rejected
    text: After an activity is re-dispatched, a completion carrying the old token is refused and changes nothing.
    level: MUST
    area: activities
    applies_to: engine
    source: "engine-rules R4.4"
    engines_differ:
      durabletask-go: accepts the stale completion (no tokens)
  - id: RPL-DET-001
    title: Replay reproduces the same actions
    text: A worker replaying a history produces the actions it produced the first time.
    level: MUST
    area: replay
    applies_to: worker
    source: "seed 000 §编排生命周期"
  - id: RPL-PAT-002
    title: A patch mismatch stalls the workflow
    text: A worker that meets a history made with a patch it does not know stalls the workflow instead of failing it.
    level: SHOULD
    area: replay
    applies_to: both
    source: "seed 000 §编排生命周期 (2. 修补)"
  - id: PAY-SIZ-001
    title: Oversized payloads stall with PAYLOAD_SIZE_EXCEEDED
    text: A workflow whose history and inbox exceed the payload limit stalls with PAYLOAD_SIZE_EXCEEDED.
    level: MAY
    area: payloads
    applies_to: engine
    source: "engine-rules R7.1(c)"
  - id: TMR-FIR-001
    title: Durable timers fire at their due time
    text: A timer created by a workflow fires no earlier than its fire_at time.
    level: SHOULD
    area: timers
    applies_to: engine
    source: "engine-rules R6.1"
"""

EXPECTED_CELLS = {
    ("ACT-ALO-001", REF): "PASSED",
    ("ACT-ALO-001", GO): "FAILED",
    ("ACT-TOK-002", REF): "PASSED",
    ("ACT-TOK-002", GO): "KNOWN_FAILURE",
    ("RPL-DET-001", REF): "PASSED",
    ("RPL-DET-001", GO): "PASSED",
    ("RPL-PAT-002", REF): "PASSED",
    ("RPL-PAT-002", GO): "ERROR",
    ("PAY-SIZ-001", REF): "PASSED",
    ("PAY-SIZ-001", GO): "NOT_APPLICABLE",
    ("TMR-FIR-001", REF): "UNCOVERED",
    ("TMR-FIR-001", GO): "UNCOVERED",
    ("XTR-UNK-001", REF): "PASSED",
    ("XTR-UNK-001", GO): "UNCOVERED",
}

FAILED_MESSAGE = """\
activities/at-least-once on durabletask-go+dapr-python: 2 mismatches
- workflow at-least-once-1: expected status COMPLETED, got RUNNING after 30.0s (virtual)
- activity task 2 (charge_card): dispatched 1 time, expected at least 2 after its completion was dropped

Reproduce with:

    python -m conformance run scenarios/activities/at-least-once.yaml --pair durabletask-go+dapr-python"""

ERROR_MESSAGE = """\
the sidecar exited with status 2 during the scenario (stderr tail: panic: nil map)

Reproduce with:

    python -m conformance run scenarios/replay/patch-mismatch.yaml --pair durabletask-go+dapr-python"""


def _e(
    t: float, channel: str, direction: str, rpc: str, summary: str, fault: str | None = None, status: str | None = None, **message: object
) -> TranscriptEntry:
    return TranscriptEntry(
        t=t, channel=channel, direction=direction, rpc=rpc, summary=summary, message=dict(message), fault=fault, status=status
    )


def at_least_once_transcript(*, dropped: bool) -> tuple[TranscriptEntry, ...]:
    iid = "at-least-once-1"
    entries = [
        _e(0.000, "worker", "request", "GetWorkItems", "open the work-item stream"),
        _e(0.004, "client", "request", "StartInstance", f"name=charge instance={iid}", instanceId=iid, name="charge"),
        _e(0.006, "client", "response", "StartInstance", f"instance={iid}", instanceId=iid),
        _e(0.010, "worker", "item", "GetWorkItems", "WorkflowRequest new events: WorkflowStarted, ExecutionStarted", instanceId=iid),
        _e(0.031, "worker", "request", "CompleteOrchestratorTask", "actions: ScheduleTask#1 reserve", instanceId=iid),
        _e(0.032, "worker", "response", "CompleteOrchestratorTask", "ok"),
        _e(0.035, "worker", "item", "GetWorkItems", "ActivityRequest reserve task 1 token=a1", taskId=1),
        _e(0.052, "worker", "request", "CompleteActivityTask", 'task 1 result "reserved"', taskId=1, result='"reserved"'),
        _e(0.053, "worker", "response", "CompleteActivityTask", "ok"),
        _e(0.058, "worker", "item", "GetWorkItems", "WorkflowRequest new events: TaskCompleted#1", instanceId=iid),
        _e(0.071, "worker", "request", "CompleteOrchestratorTask", "actions: ScheduleTask#2 charge_card", instanceId=iid),
        _e(0.072, "worker", "response", "CompleteOrchestratorTask", "ok"),
        _e(0.075, "worker", "item", "GetWorkItems", "ActivityRequest charge_card task 2 token=b7", taskId=2),
        _e(0.098, "worker", "request", "CompleteActivityTask", 'task 2 result "charged"', fault="drop" if dropped else None, taskId=2),
    ]
    if dropped:
        entries += [
            _e(0.099, "worker", "response", "CompleteActivityTask", "no answer (dropped by the proxy)", status="UNAVAILABLE"),
            _e(0.100, "client", "request", "WaitForInstanceCompletion", f"instance={iid} timeout=30s"),
            _e(30.100, "client", "response", "WaitForInstanceCompletion", "deadline exceeded: status RUNNING", status="DEADLINE_EXCEEDED"),
            _e(30.104, "client", "request", "GetInstance", f"instance={iid}"),
            _e(30.105, "client", "response", "GetInstance", "RUNNING, 4 history events"),
        ]
    else:
        entries += [
            _e(0.099, "worker", "response", "CompleteActivityTask", "ok"),
            _e(0.100, "client", "request", "WaitForInstanceCompletion", f"instance={iid}"),
            _e(0.104, "worker", "item", "GetWorkItems", "WorkflowRequest new events: TaskCompleted#2", instanceId=iid),
            _e(0.118, "worker", "request", "CompleteOrchestratorTask", "actions: CompleteWorkflow COMPLETED", instanceId=iid),
            _e(0.119, "worker", "response", "CompleteOrchestratorTask", "ok"),
            _e(0.121, "client", "response", "WaitForInstanceCompletion", 'COMPLETED output="charged"'),
        ]
    return tuple(entries)


def zombie_transcript() -> tuple[TranscriptEntry, ...]:
    return (
        _e(0.000, "worker", "item", "GetWorkItems", "ActivityRequest ship task 3 token=c1", taskId=3),
        _e(5.000, "worker", "item", "GetWorkItems", "ActivityRequest ship task 3 token=c2 (lease expired)", taskId=3),
        _e(5.020, "worker", "request", "CompleteActivityTask", 'task 3 token=c2 result "shipped"', taskId=3),
        _e(5.021, "worker", "response", "CompleteActivityTask", "ok"),
        _e(5.400, "worker", "request", "CompleteActivityTask", 'task 3 token=c1 result "late"', fault="replay later (zombie)", taskId=3),
        _e(5.401, "worker", "response", "CompleteActivityTask", "rejected: stale completion token", status="NOT_FOUND"),
    )


def fan_out_transcript(n_activities: int = 64) -> tuple[TranscriptEntry, ...]:
    """About 200 messages: one workflow fanning out to n activities, then completing."""
    iid = "fan-out-1"
    entries = [
        _e(0.0, "client", "request", "StartInstance", f"name=fan_out instance={iid} input=[1..{n_activities}]"),
        _e(0.002, "client", "response", "StartInstance", f"instance={iid}"),
        _e(0.004, "worker", "item", "GetWorkItems", "WorkflowRequest new events: WorkflowStarted, ExecutionStarted"),
        _e(0.020, "worker", "request", "CompleteOrchestratorTask", f"actions: ScheduleTask#1..#{n_activities} square"),
    ]
    t = 0.021
    for i in range(1, n_activities + 1):
        t += 0.003
        entries.append(_e(round(t, 3), "worker", "item", "GetWorkItems", f"ActivityRequest square task {i} input={i}", taskId=i))
        t += 0.002
        entries.append(
            _e(round(t, 3), "worker", "request", "CompleteActivityTask", f"task {i} result {i * i}", taskId=i, result=str(i * i))
        )
        entries.append(_e(round(t + 0.001, 3), "worker", "response", "CompleteActivityTask", "ok"))
    t += 0.01
    entries += [
        _e(round(t, 3), "worker", "item", "GetWorkItems", f"WorkflowRequest new events: TaskCompleted#1..#{n_activities}"),
        _e(round(t + 0.02, 3), "worker", "request", "CompleteOrchestratorTask", "actions: CompleteWorkflow COMPLETED output=[1,4,9,…]"),
        _e(round(t + 0.03, 3), "client", "response", "WaitForInstanceCompletion", "COMPLETED"),
    ]
    return tuple(entries)


def _finished(scenario: str, pair: str, outcome: Outcome, requirements: tuple[str, ...], duration: float, **kw: object) -> ScenarioFinished:
    sidecar, worker = pair.split("+")
    return ScenarioFinished(
        scenario=scenario,
        pair=pair,
        sidecar=sidecar,
        worker=worker,
        outcome=outcome,
        duration_s=duration,
        requirements=requirements,
        source=f"scenarios/{scenario}.yaml",
        reproduce=f"python -m conformance run scenarios/{scenario}.yaml --pair {pair}",
        **kw,  # type: ignore[arg-type]
    )


def results() -> list[ScenarioFinished]:
    alo = ("ACT-ALO-001",)
    return [
        _finished(
            "activities/at-least-once",
            REF,
            Outcome.PASSED,
            alo,
            0.12,
            title="A dropped completion is redelivered",
            transcript=at_least_once_transcript(dropped=False),
        ),
        _finished(
            "activities/stale-token",
            REF,
            Outcome.PASSED,
            ("ACT-TOK-002", "ACT-ALO-001"),
            5.41,
            title="A zombie completion is rejected",
            transcript=zombie_transcript(),
        ),
        _finished("replay/determinism", REF, Outcome.PASSED, ("RPL-DET-001",), 0.38, transcript=fan_out_transcript()),
        _finished(
            "replay/patch-mismatch",
            REF,
            Outcome.PASSED,
            ("RPL-PAT-002",),
            0.21,
            gap_passed=True,
            gap_reason="patch mismatch not detected yet (issue 12)",
        ),
        _finished("payloads/oversized", REF, Outcome.PASSED, ("PAY-SIZ-001",), 0.09),
        _finished("extra/uncatalogued", REF, Outcome.PASSED, ("XTR-UNK-001",), 0.02),
        _finished(
            "activities/at-least-once",
            GO,
            Outcome.FAILED,
            alo,
            30.2,
            title="A dropped completion is redelivered",
            message=FAILED_MESSAGE,
            transcript=at_least_once_transcript(dropped=True),
        ),
        _finished(
            "activities/stale-token",
            GO,
            Outcome.KNOWN_FAILURE,
            ("ACT-TOK-002", "ACT-ALO-001"),
            0.0,
            gap_reason="durabletask-go has no completion tokens",
        ),
        _finished("replay/determinism", GO, Outcome.PASSED, ("RPL-DET-001",), 0.52, transcript=fan_out_transcript()),
        _finished(
            "replay/patch-mismatch",
            GO,
            Outcome.ERROR,
            ("RPL-PAT-002",),
            1.7,
            message=ERROR_MESSAGE,
            transcript=at_least_once_transcript(dropped=False)[:5],
        ),
        _finished(
            "payloads/oversized", GO, Outcome.NOT_APPLICABLE, ("PAY-SIZ-001",), 0.0, gap_reason="the pair lacks the capability max_payload"
        ),
    ]


def events() -> list[Event]:
    rs = results()
    out: list[Event] = [RunStarted(run_id=RUN_ID, started_at=STARTED_AT, pairs=(REF, GO), scenario_count=len(rs), command=COMMAND)]
    for r in rs:
        out.append(ScenarioStarted(scenario=r.scenario, pair=r.pair))
        out.append(r)
    counts: dict[str, int] = {}
    for r in rs:
        counts[r.outcome.value] = counts.get(r.outcome.value, 0) + 1
    duration = 41.7
    out.append(RunFinished(run_id=RUN_ID, finished_at=STARTED_AT + duration, duration_s=duration, counts=counts))
    return out
