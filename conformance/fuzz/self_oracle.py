"""Self-oracle fuzzing: an SDK's verdicts from the contract and from its own answers, not the reference's.

The SDK under test answers every turn of a schedule, and the reference engine's own rules
(`taskhub_core.machine.apply`, through `interleave.run_programs`)
commit its answers, so every history it is sent is one a real engine would write for that SDK (its
action ids, its timers, its child ids). Each example is then held to the contract:

| kind | level | what must hold |
|---|---|---|
| `no-answer` | MUST | every turn of such a history is answered (twice in 10 s, the second time by a fresh process) |
| `self-determinism` | MUST | every prefix of the history, sent again to the same process, gets the recorded answer |
| `self-determinism-fresh-process` | MUST | ... and sent to another process of the SDK, one that never saw the instance |
| `semantics` | MUST | each committed turn ends the workflow exactly when the program language says, with its status and output (the reference executor evaluates the program on the SDK's history, renumbered as it numbers ids) |
| `lost-progress` | MUST | a turn after which the program goes on (new work) is not answered with nothing |
| `token-not-echoed` | MUST | every answer carries its work item's completion token |
| `robustness` | SHOULD | an impossible history (a turn broken by `mutate.mutate`) is answered, not hung on |

The first three rows also cover "no result, timer or event lost or consumed twice": a lost or
doubly consumed result changes the program's outcome, or leaves it waiting where the program
language does not. Reachable perturbations are valid inputs (a second ExecutionSuspended, a
resume while running, duplicated events, events batched into one turn, redelivered turns:
`perturb=True`). Each example runs up to `parallel` histories in lock step (`interleave.run_programs`),
so every stream has several turns in flight.

Differences from the reference worker's answer to the same (renumbered) turn are never findings:
they go to the differential report (`differential.DifferentialReport`).

Findings are `worker_fuzz.Finding`s with a `level` and a `requirement` (data for the verdict
levels); Hypothesis shrinks each kind on its own, as in `worker_fuzz`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from taskhub_programs import Bundle
from taskhub_wire import pb
from taskhub_wire.kinds import EventKind

from conformance.fuzz import programs as P
from conformance.dialects.compare import EXACT, Comparison, compare, normalise
from conformance.reporting.differential import DifferentialReport
from conformance.verdict import Level  # the one scale of a mismatch's weight, re-exported for the campaign
from conformance.dialects.history import dense, is_sentinel_action, ranked
from conformance.fuzz.interleave import DataChooser, FastDataChooser, Program, TurnCase, chance, pick, run_programs
from conformance.fuzz.mutate import mutate
from conformance.fuzz.worker_fuzz import INSTANCE_IDS, Finding, WorkerCampaign
from conformance.fuzz.workers import ReferenceWorker, reference_answer


@dataclass(frozen=True)
class Kind:
    level: Level
    requirement: str  # the catalogue requirement it breaks, "" where the lead still has to name one
    scenario: bool  # written as a regression vector (the reference's answer is the expected one)


KINDS: Mapping[str, Kind] = {
    "no-answer": Kind(Level.MUST, "RPL-ANSWER-001", scenario=True),
    "self-determinism": Kind(Level.MUST, "RPL-DET-001", scenario=False),
    "self-determinism-fresh-process": Kind(Level.MUST, "RPL-DET-001", scenario=False),
    "semantics": Kind(Level.MUST, "RPL-EXEC-001", scenario=True),
    "token-not-echoed": Kind(Level.MUST, "TOK-ECHO-001", scenario=False),
    "task-execution-ids": Kind(Level.MUST, "ACT-TEID-003", scenario=False),
    "lost-progress": Kind(Level.MUST, "RPL-EXEC-001", scenario=True),
    "robustness": Kind(Level.SHOULD, "RPL-ANSWER-001", scenario=False),
    # A semantics difference on a turn whose history resumes a running instance: the rule it breaks
    # is that a worker ignores such a resume (R6.7; the declared gap of both Python SDKs, which share
    # the executor: dapr-ext-workflow's _durabletask/worker.py and durabletask-dapr's durabletask/worker.py).
    "stray-resume": Kind(Level.MUST, "LIFE-SUSPEND-002", scenario=True),
}
_TERMINAL_NAMES = {pb.ORCHESTRATION_STATUS_COMPLETED: "COMPLETED", pb.ORCHESTRATION_STATUS_FAILED: "FAILED",
                   pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW: "CONTINUED_AS_NEW",
                   pb.ORCHESTRATION_STATUS_TERMINATED: "TERMINATED", pb.ORCHESTRATION_STATUS_CANCELED: "CANCELED"}


def completion(resp: pb.WorkflowResponse) -> tuple[str, Any] | None:
    """How a turn's answer ends the workflow, as an engine applies it (the first completion counts,
    R3.1): (status, value) where value is the output of COMPLETED, the new input of
    CONTINUED_AS_NEW, and nothing for a failure (its error type is the SDK language's); None: runs on."""
    for a in resp.actions:
        if not a.HasField("completeWorkflow"):
            continue
        cw = a.completeWorkflow
        status = _TERMINAL_NAMES.get(cw.workflowStatus, str(cw.workflowStatus))
        if status == "FAILED":
            return status, None
        return status, _payload(cw.result.value) if cw.HasField("result") else None
    return None


def _payload(text: str) -> Any:
    if text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"text": text}


def _nondeterminism(resp: pb.WorkflowResponse) -> bool:
    return any(a.HasField("completeWorkflow") and "NonDeterminism" in a.completeWorkflow.failureDetails.errorType
               for a in resp.actions)


def _progress(resp: pb.WorkflowResponse) -> bool:
    """The answer starts new work (an activity, a child, a timer that fires)."""
    return any(a.HasField("scheduleTask") or a.HasField("createChildWorkflow")
               or (a.HasField("createTimer") and not is_sentinel_action(a)) for a in resp.actions)


def perturbed(case: TurnCase) -> bool:
    """The turn holds a reachable oddity of `run_programs(perturb=True)`: a second ExecutionSuspended
    before a resume, or a resume while running."""
    suspended = False
    for ev in list(case.past) + list(case.new):
        kind = ev.WhichOneof("eventType")
        if kind == EventKind.EXECUTION_SUSPENDED.field:
            if suspended:
                return True
            suspended = True
        elif kind == EventKind.EXECUTION_RESUMED.field:
            if not suspended:
                return True
            suspended = False
    return False


def stray_resume(case: TurnCase) -> bool:
    """The turn's history resumes an instance that is not suspended (R6.7: both engines record it)."""
    suspended = False
    for ev in list(case.past) + list(case.new):
        if ev.HasField("executionSuspended"):
            suspended = True
        elif ev.HasField("executionResumed"):
            if not suspended:
                return True
            suspended = False
    return False


def ends_suspended(case: TurnCase) -> bool:
    """The instance is suspended once the turn's events are applied (the last marker is a suspend)."""
    state = False
    for ev in list(case.past) + list(case.new):
        if ev.HasField("executionSuspended"):
            state = True
        elif ev.HasField("executionResumed"):
            state = False
    return state


def same_bytes(a: pb.WorkflowResponse, b: pb.WorkflowResponse) -> bool:
    """`a` and `b` are the same answer byte for byte, but for their completion tokens (each echoes
    its own work item's). Then `compare` finds them equal under any profile, and is not needed: it
    turns both into JSON, which costs more than the rest of a turn's checks."""
    if a.completionToken != b.completionToken:
        c = pb.WorkflowResponse()
        c.CopyFrom(b)
        c.completionToken = a.completionToken
        b = c
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def _replay(case: TurnCase) -> TurnCase:
    return TurnCase(case.instance_id, case.past, case.new, case.form)


@dataclass
class SelfOracleCampaign(WorkerCampaign):
    """A `WorkerCampaign` whose worker (a `workers.DriverPool`, or any worker with `answer`) drives
    the schedules itself; see the module docstring for the checks."""

    differential: DifferentialReport = field(default_factory=DifferentialReport)
    robustness: bool = True
    task_execution_ids: bool = True  # the target has the task_execution_id capability (ACT-TEID-002)
    parallel: int = 8  # histories per example, run together (at most): turns in flight on every stream

    def _fresh_process(self, rnd: int, bundle: Bundle, pool_doc: dict[str, Any], worker: Any) -> None:
        if getattr(worker, "streams", 1) > 1:
            return  # every example already replays on another process
        super()._fresh_process(rnd, bundle, pool_doc, worker)

    def _example(self, c: DataChooser, data: Any, bundle: Bundle, pool_doc: dict[str, Any], pool: list[str],
                 worker: Any, reference: ReferenceWorker, rnd: int) -> None:
        c = FastDataChooser(data)  # type: ignore[assignment]
        streams = getattr(worker, "streams", 1)
        # Several histories per example, stepped together, so that each stream has turns in flight;
        # Hypothesis shrinks the count towards one.
        count = 1 + c.int(0, max(0, self.parallel - 1))
        programs = []
        for k in range(count):
            iid = pick(c, INSTANCE_IDS)
            programs.append(Program(pool[c.int(0, len(pool) - 1)], data.draw(P.inputs), iid if k == 0 else f"{iid}-{k}"))
        unechoed = getattr(worker, "unechoed", 0)
        submit = getattr(worker, "submit_many", None) if streams > 1 else None
        early: dict[tuple[int, int], tuple[Any, list[Future[pb.WorkflowResponse | None]]]] = {}

        def answer_many(jobs: list[tuple[int, TurnCase]]) -> list[pb.WorkflowResponse | None]:
            self.progress.count("turns", len(jobs))
            if streams == 1:
                return [worker.answer(case) for _, case in jobs]
            got = worker.answer_many([(k % streams, case) for k, case in jobs])
            if submit is not None:
                # The replays of this step's answered turns go out now, not after the last step: the
                # drivers answer them while the harness draws and sends the next step.
                self._replay_early(submit, early, [(k, case) for (k, case), g in zip(jobs, got) if g is not None],
                                   streams)
            return got

        runs = run_programs(bundle, programs, c, answer_many, events=self.features.events,
                            suspend=self.features.suspend, max_turns=self.max_turns, perturb=self._perturb)
        self.arrival.observe(bundle, runs)
        if getattr(worker, "unechoed", 0) > unechoed:
            bad = next(x for r in runs for x in r.cases if x.got is not None and not x.got.completionToken)
            note = f"program {runs[0].workflow}, {count} histories, answered by {self.target}"
            self._finding("token-not-echoed", Comparison((("completionToken", "the work item's", ""),), "strict",
                                                        normalise(bad.got), normalise(bad.got)), bad,
                          workflow=runs[0].workflow, pool_doc=pool_doc, rnd=rnd, note=note, worker=worker,
                          bundle=bundle)
        contexts = []
        for k, run in enumerate(runs):
            note = (f"program {run.workflow}, input {run.input!r}, instance {run.instance_id}, {len(run.cases)} "
                    f"turn(s) answered by {self.target}, end {run.end}"
                    + (f" (history {k + 1} of {count} run together)" if count > 1 else ""))
            ctx = dict(workflow=run.workflow, pool_doc=pool_doc, rnd=rnd, note=note, worker=worker, bundle=bundle)
            contexts.append(ctx)
            if run.end == "no-answer":
                last = run.cases[-1]
                if self._perturb and perturbed(last):
                    # Each such hang costs two timeouts and a restart: once one is seen, the campaign
                    # stops making these perturbations and spends its budget on other schedules.
                    self._perturb = False
                    self.progress.say(f"{self.target} hangs on a perturbed history (a second suspend or a stray "
                                      "resume): no more such perturbations in this campaign")
                # Written in the reference's numbering, as every vector is (the runner sends it to
                # each SDK in that SDK's own).
                case = ranked(last)
                raw = reference_answer(bundle, case)
                self._finding("no-answer", compare(raw, None), case, raw=raw, ref=self.dialect.reference(raw, case),
                              **ctx)
            if self.task_execution_ids:
                for x in run.cases:
                    if x.got is not None:
                        self._execution_ids(x, ctx)
        self._replays(runs, contexts, streams, worker, early)
        for run, ctx in zip(runs, contexts):
            for x in run.cases:
                if x.got is not None and x.committed:
                    self._semantics(x, bundle, ctx)
        answered = [(x, ctx) for run, ctx in zip(runs, contexts) for x in run.cases if x.got is not None]
        if self.robustness and self.mutations and answered and chance(c, 25):
            x, ctx = pick(c, answered)
            self._robustness(c, x, worker, streams, ctx)

    # ------------------------------------------------------------------ the checks

    def _execution_ids(self, x: TurnCase, ctx: dict[str, Any]) -> None:
        """ACT-TEID-002: every ScheduleTask of one answer has a non-empty id of its own (a retry
        keeps its call's id, but never comes in the same answer as another attempt)."""
        assert x.got is not None
        ids = [a.scheduleTask.taskExecutionId for a in x.got.actions if a.HasField("scheduleTask")]
        if all(ids) and len(set(ids)) == len(ids):
            return
        what = "an empty taskExecutionId" if not all(ids) else "two calls with one taskExecutionId"
        cmp = Comparison((("actions[].scheduleTask.taskExecutionId", "one non-empty id per call", what),), "strict",
                         normalise(x.got), normalise(x.got))
        self._finding("task-execution-ids", cmp, x, **ctx)

    def _replay_early(self, submit: Any, early: dict[tuple[int, int], tuple[Any, list[Any]]],
                      answered: list[tuple[int, TurnCase]], streams: int) -> None:
        """Send the replays of `answered` (run index, turn) now, without waiting: on the turn's own
        stream and on the next one. Their futures are kept under (run index, how many answered
        turns of that run came before): each answered turn is one case of its run, in order
        (`interleave._Sim.steps`), which is how `_replays` finds them."""
        jobs = []
        for k, case in answered:
            home = k % streams
            jobs += [(home, _replay(case)), ((home + 1) % streams, _replay(case))]
        if not jobs:
            return
        self.progress.count("turns", len(jobs))
        futures = submit(jobs)
        for i, (k, case) in enumerate(answered):
            early[(k, sum(1 for key in early if key[0] == k))] = (case.past, futures[2 * i:2 * i + 2])

    def _replays(self, runs: list[Any], contexts: list[dict[str, Any]], streams: int, worker: Any,
                 early: dict[tuple[int, int], tuple[Any, list[Any]]] | None = None) -> None:
        """Every answered turn again: on the stream that made it, and on another one (a process that
        never saw the instance). Those already sent while the schedule ran (`early`) are collected;
        the others are sent all at once."""
        jobs, recorded, sent = [], [], []
        early = early or {}
        for k, (run, ctx) in enumerate(zip(runs, contexts)):
            home = k % streams
            for n, x in enumerate(x for x in run.cases if x.got is not None):
                kinds = ["self-determinism"] + (["self-determinism-fresh-process"] if streams > 1 else [])
                past, futures = early.get((k, n), (None, None))
                if futures is not None and past is x.past:  # the very turn (its history's own tuple)
                    sent += [(x, ctx, kind, f) for kind, f in zip(kinds, futures)]
                    continue
                jobs.append((home, _replay(x)))
                recorded.append((x, ctx, kinds[0]))
                if streams > 1:
                    jobs.append(((home + 1) % streams, _replay(x)))
                    recorded.append((x, ctx, kinds[1]))
        if jobs:
            self.progress.count("turns", len(jobs))
        again = (worker.answer_many(jobs) if streams > 1 else [worker.answer(case) for _, case in jobs]) if jobs else []
        results = [(x, ctx, kind, f.result()) for x, ctx, kind, f in sent]
        results += [(x, ctx, kind, got) for (x, ctx, kind), got in zip(recorded, again)]
        for x, ctx, kind, got in results:
            if got is not None and same_bytes(x.got, got):  # type: ignore[arg-type]
                continue
            cmp = compare(x.got, got, profile=self.profile)  # type: ignore[arg-type]
            if not cmp.equal:
                self._finding(kind, cmp, x, **ctx)

    def _semantics(self, x: TurnCase, bundle: Bundle, ctx: dict[str, Any]) -> None:
        """The turn's completion against the program language: the reference executor on the SDK's
        history, renumbered the reference's way. Differences in anything else go to the report."""
        assert x.got is not None
        case = ranked(x)
        raw = reference_answer(bundle, case)
        ref = self.dialect.reference(raw, case)
        got = dense(x.got, x) if case is not x else x.got
        self.differential.compared(sdk=self.target)
        diff = None if same_bytes(ref, got) else compare(ref, got, profile=EXACT)
        if diff is not None and not diff.equal:
            self.differential.add_comparison(sdk=self.target, comparison=diff, source=f"fuzz seed {self.seed}",
                                             example={"program": ctx["workflow"], "example": ctx["note"]})
        if any(e.HasField("executionTerminated") for e in x.new):
            return  # the engine ends it TERMINATED whatever the answer says (R3.16)
        if ends_suspended(x):
            self.progress.count("suspended-not-judged")  # a suspended workflow may hold everything until resumed
            return
        if _nondeterminism(raw) and not _nondeterminism(x.got):
            self.progress.count("oracle-unavailable")  # the renumbered history is not one the reference replays
            return
        want, have = completion(raw), completion(x.got)
        if want is None and have is None and not x.got.actions and _progress(raw) and \
                not any(e.HasField("executionSuspended") for e in x.new):
            # The SDK answers nothing where the program goes on: a result, timer or event it was
            # given is lost, and nothing outstanding will ever wake it again.
            cmp = Comparison((("actions", [a.WhichOneof("workflowActionType") for a in ref.actions], []),), "strict",
                             normalise(ref), normalise(got))
            self._finding("lost-progress", cmp, case, raw=raw, ref=ref, got=got, **ctx)
        if want == have:
            return
        if want is None or have is None or want[0] != have[0]:
            path, a, b = "completion.workflowStatus", want[0] if want else "running", have[0] if have else "running"
        else:
            path, a, b = f"completion.{'newInput' if want[0] == 'CONTINUED_AS_NEW' else 'output'}", want[1], have[1]
        # The signature is the outcome difference alone: one kind, whatever other actions differ.
        cmp = Comparison(((path, a, b),), "strict", normalise(ref), None)
        kind = "stray-resume" if stray_resume(x) else "semantics"
        self._finding(kind, cmp, case, raw=raw, ref=ref, got=got, **ctx)

    def _robustness(self, c: DataChooser, base: TurnCase, worker: Any, streams: int, ctx: dict[str, Any]) -> None:
        broken = mutate(c, _replay(base), rounds=1)
        if broken is None:
            return
        self.progress.count("turns")
        got = worker.answer(broken) if streams == 1 else worker.answer(broken, stream=0)
        crashed = hasattr(worker, "alive") and not worker.alive()
        if got is None or crashed:
            what = "no answer in time" if got is None else "the worker process died"
            self._finding("robustness", Comparison((("answer", "an answer", what),), "kind", {}, None), broken, **ctx)

    def _finding(self, kind: str, cmp: Comparison, case: TurnCase, *, workflow: str, pool_doc: dict[str, Any],
                 rnd: int, note: str, worker: Any, bundle: Bundle, raw: pb.WorkflowResponse | None = None,
                 ref: pb.WorkflowResponse | None = None, got: pb.WorkflowResponse | None = None) -> None:
        if raw is None:
            raw = case.got if case.got is not None else reference_answer(bundle, ranked(case))
        self._report(kind, cmp, case, workflow, pool_doc, ref if ref is not None else raw,
                     got if got is not None else case.got, rnd, note, worker=worker, raw=raw)

    def _report(self, kind: str, cmp: Comparison, case: TurnCase, workflow: str, pool_doc: dict[str, Any],
                ref: pb.WorkflowResponse, got: pb.WorkflowResponse | None, rnd: int, note: str,
                *, worker: Any = None, raise_: bool = True, raw: pb.WorkflowResponse | None = None) -> None:
        spec = KINDS.get(kind)
        if spec is not None:
            self._levels[f"{kind}: {cmp.signature()}"] = spec
        super()._report(kind, cmp, case, workflow, pool_doc, ref, got, rnd, note, worker=worker, raise_=raise_,
                        raw=raw)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._levels: dict[str, Kind] = {}
        self._perturb = True

    def _same_answer(self, kind: str) -> Any:
        """A semantics finding's history is the reference's renumbering: answers are the same when
        they end the workflow alike."""
        if kind not in ("semantics", "stray-resume"):
            return super()._same_answer(kind)
        return lambda a, b: (a is None and b is None) or (
            a is not None and b is not None and completion(a) == completion(b))

    def _found(self, f: Finding) -> None:
        spec = self._levels.get(f.key, KINDS.get(f.kind))
        if spec is not None:
            f.level, f.requirement, f.scenario_ok = spec.level.value, spec.requirement, spec.scenario
        super()._found(f)


__all__ = ["KINDS", "Kind", "Level", "SelfOracleCampaign", "completion"]
