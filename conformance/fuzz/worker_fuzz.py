"""Determinism and differential replay campaigns for one worker.

A campaign runs in rounds. Each round draws a pool of random programs (`programs.sample_pool`,
deterministic in the seed), starts the worker under test with that bundle (an SDK driver loads
its programs once, at start), and runs Hypothesis over examples. An example is one program of
the pool, an input, and a schedule (`interleave.run_program` with every decision drawn), so
Hypothesis shrinks schedules, inputs and the program choice; optionally one of the turns is also
mutated (`mutate.mutate`). Every turn a worker would be sent is checked:

- differential: the worker's answer equals the reference worker's (`compare`, strict on valid
  histories, failure kind on mutated ones);
- determinism: one turn per example is sent twice and must be answered the same; at the end of
  a round the worker is restarted (a fresh process) and a sample of turns is sent again; the
  reference executor answers each turn twice in-process and the sample once more in a fresh
  Python process (another hash seed).

A difference raises a finding whose exception class is specific to its signature (the kind of
difference, `compare.signature`), so Hypothesis shrinks each kind on its own. Signatures already
found (in this campaign, or written as regression scenarios earlier) no longer fail, so a
campaign goes on to find new kinds. Examples are kept in the Hypothesis example database, keyed
by target, profile and program pool: a campaign with the same seed replays earlier failures first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hypothesis import given
from hypothesis import strategies as st

from taskhub_core.turn import stale
from taskhub_programs import Bundle, parse_bundle
from taskhub_wire import pb

from conformance.fuzz import programs as P
from conformance.fuzz.common import (
    Budget, Clock, FindingError, Progress, Stage, Timeline, finding_error, hypothesis_settings, key, other_errors,
    seed_for, configured,
)
from conformance.dialects.compare import EXACT, Comparison, Profile, compare
from conformance.dialects.history import NATIVE, Dialect
from conformance.fuzz.arrival import ArrivalTally
from conformance.fuzz.interleave import DataChooser, RandomChooser, TurnCase, chance, pick, run_program
from conformance.fuzz.mutate import mutate
from conformance.fuzz.workers import ReferenceWorker, SubprocessReference, WorkerUnderTest, reference_answer

INSTANCE_IDS = ("fz-1", "fz-1", "wf:42", "fz-é")
WorkerFactory = Callable[[Bundle, Mapping[str, Any]], WorkerUnderTest]


@dataclass
class Finding:
    target: str
    kind: str  # differential | determinism | no-answer | reference-determinism | *-fresh-process
    signature: str
    case: TurnCase
    workflow: str
    bundle_doc: dict[str, Any]
    ref: pb.WorkflowResponse
    got: pb.WorkflowResponse | None
    comparison: Comparison
    seed: int
    round: int
    example: str = ""
    flaky: bool = False
    scenario: Path | None = None
    verified: str = ""
    stderr: str = ""
    raw: pb.WorkflowResponse | None = None  # the reference's own answer to `case` (what a scenario expects)
    found_at: float = field(default_factory=time.time)
    at_example: int = 0  # the campaign's example count when first raised (1: the first one it ran)
    level: str = ""  # MUST | SHOULD | OBSERVATION, where the campaign knows it (self_oracle.KINDS)
    requirement: str = ""  # the requirement it breaks, where the campaign knows it
    scenario_ok: bool = True  # the reference's answer is a fair expectation for a regression vector
    judged: str = ""  # how a flaky finding was classified (`WorkerCampaign._judge_flaky`)
    other: pb.WorkflowResponse | None = None  # the second answer of an SDK that answers one turn two ways

    def headline(self) -> str:
        return f"{self.kind} on {self.target}: {self.signature}"

    @property
    def key(self) -> str:
        return f"{self.kind}: {self.signature}"


@dataclass
class WorkerCampaign:
    target: str
    make_worker: WorkerFactory
    features: P.Features = P.ALL_FEATURES
    profile: Profile = EXACT
    dialect: Dialect = NATIVE
    seed: int = 0
    budget: Budget = Budget(seconds=60)
    database: Path | None = None
    pool_size: int = 24
    chunk: int = 60
    round_examples: int = 400  # examples per round (one program pool, one worker process)
    mutations: bool = True
    fresh_process: bool = True
    derandomize: bool = False
    shrink: bool = True
    known: set[str] = field(default_factory=set)
    out: TextIO | None = None
    on_finding: Callable[[Finding], None] | None = None
    max_turns: int = 10
    shard: int = 0  # which shard of a campaign this is (0: the only one, or the first)
    began: float | None = None  # time.monotonic() the budget counts from (the process's start); None: now

    def __post_init__(self) -> None:
        self.findings: list[Finding] = []
        self.progress = Progress(self.target, self.out)
        self.clock = Clock(self.budget, grace=0.0)  # the budget includes start-up; a shrink stops at its end
        self.timeline = Timeline()
        if self.began is not None:  # what ran before the campaign (imports, targets, the SDK's probe)
            self.timeline.add(Stage.STARTUP, seconds=self.clock.began - self.began)
            self.clock.began = self.began
        self._warm = False  # the first example of a round runs on freshly started processes
        self._first_finding: tuple[float, int, float] | None = None  # (when, turns, CPU by then) in this chunk
        self._pending: dict[str, Finding] = {}
        self.refused: dict[str, str] = {}
        self._sample: list[tuple[TurnCase, pb.WorkflowResponse | None, str]] = []
        self.arrival = ArrivalTally()  # the arrival-order cells the examples reach (conformance/fuzz/arrival.py)

    # ------------------------------------------------------------------ the campaign

    def run(self) -> list[Finding]:
        rnd = 0
        try:
            while not self.clock.exhausted():
                self._round(rnd)
                rnd += 1
        finally:
            self.progress.tick(self.clock, findings=len(self.findings), force=True, extra="done")
        return self.findings

    def _round(self, rnd: int) -> None:
        began = time.monotonic()
        pool_doc = round_pool(seed=self.seed, rnd=rnd, size=self.pool_size, features=self.features)
        bundle = parse_bundle({"programs": pool_doc})
        pool = sorted(n for n in pool_doc if n.startswith("p"))
        self.progress.say(f"round {rnd}: {len(pool)} programs (pool {P.digest(pool_doc)}), starting {self.target}")
        self.timeline.add(Stage.STARTUP, seconds=time.monotonic() - began)  # drawing the pool
        began = time.monotonic()
        worker = self.make_worker(bundle, pool_doc)
        self.timeline.add(Stage.STARTUP, seconds=time.monotonic() - began)
        self._warm = False
        self._warm_up(worker, bundle, sorted(n for n in getattr(worker, "bundle_doc", pool_doc) if n.startswith("p")))
        refused = getattr(worker, "refused", {})
        if refused:  # the target cannot express some programs: fuzz the others
            pool_doc = dict(worker.bundle_doc)  # type: ignore[attr-defined]
            bundle = worker.bundle  # type: ignore[attr-defined]
            pool = sorted(n for n in pool_doc if n.startswith("p"))
            self.refused.update(refused)
            self.progress.say(f"round {rnd}: {self.target} cannot express {len(refused)} program(s) "
                              f"({', '.join(sorted(refused))}); {len(pool)} left")
        self._sample = []
        try:
            done_in_round = 0
            chunk_no = 0
            while not self.clock.exhausted() and done_in_round < self.round_examples:
                n = min(self.chunk, self.clock.remaining_examples(self.chunk), self.round_examples - done_in_round)
                before = self.clock.examples
                self._chunk(rnd, chunk_no, bundle, pool_doc, pool, worker, n)
                done_in_round += max(1, self.clock.examples - before)
                chunk_no += 1
            if self.fresh_process and not self.clock.hard_stop():
                self._fresh_process(rnd, bundle, pool_doc, worker)
        finally:
            counters = getattr(worker, "counters", None)
            for k, v in (counters() if counters is not None else {}).items():
                self.timeline.costs[k] = self.timeline.costs.get(k, 0) + v
            worker.close()

    def _chunk(self, rnd: int, chunk_no: int, bundle: Bundle, pool_doc: dict[str, Any], pool: list[str],
               worker: WorkerUnderTest, n: int) -> None:
        self._pending = {}
        reference = ReferenceWorker(bundle)

        self._first_finding = None
        chunk_began, turns_before, cpu_before = time.monotonic(), self._turns(), time.process_time()

        # One finding ends the search of a chunk: it is shrunk, then the next chunk searches on (its
        # kind now known). Time after the first finding is then shrinking only, reported apart.
        @given(st.data())
        def example(data: Any) -> None:
            if self.clock.hard_stop() or self._shrunk_enough():
                return  # passes at once: Hypothesis ends its shrink with what it has
            self.clock.examples += 1
            began, turns, cpu = time.monotonic(), self._turns(), time.process_time()
            try:
                self._example(DataChooser(data), data, bundle, pool_doc, pool, worker, reference, rnd)
            finally:
                if not self._warm:  # the first example on fresh processes: warm-up, not search
                    self._warm = True
                    took, done, used = time.monotonic() - began, self._turns() - turns, time.process_time() - cpu
                    self.timeline.add(Stage.WARMUP, seconds=took, turns=done, cpu=used)
                    self.timeline.add(Stage.SEARCH, seconds=-took, turns=-done, cpu=-used)
                if self._pending and self._first_finding is None:
                    self._first_finding = (time.monotonic(), self._turns(), time.process_time())
            self.progress.tick(self.clock, findings=len(self.findings), extra=f"round {rnd}")

        share = key("worker", self.target, self.profile.name, P.digest(pool_doc), self.features, self.mutations,
                    chunk_no)
        chosen = hypothesis_settings(max_examples=n, database=self.database, share=share,
                                     derandomize=self.derandomize, shrink=self.shrink, multiple_bugs=False)
        # Shards share the program pools and the database keys (so that each replays what the others
        # saved) and differ only in the random draws of their examples.
        shard = ("shard", self.shard) if self.shard else ()
        # Derandomized (CI), each chunk still draws its own examples: from its share's own seed.
        example = configured(example, with_settings=chosen,
                             seed=seed_for("derandomized", share) if self.derandomize
                             else seed_for("chunk", self.seed, rnd, chunk_no, *shard))
        try:
            example()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - Hypothesis' report; the findings are in _pending
            self._chunk_time(chunk_began, turns_before, cpu_before)
            flaky = "Flaky" in type(exc).__name__ or "flaky" in str(exc).lower()[:200]
            if not self._pending and flaky:
                # A worker whose answers drive the schedule (self_oracle) answered one choice sequence
                # two ways (a slow answer retried on a fresh process, say): this chunk ends, the
                # campaign goes on. A real nondeterminism is a finding of its own on the next replay.
                self.progress.count("flaky-chunks")
                self.progress.say(f"chunk {chunk_no} of round {rnd} ended early: {type(exc).__name__} "
                                  "(the worker answered one schedule two ways)")
                return
            if not self._pending:
                raise
            for err in other_errors(exc):  # an error of the fuzzer itself, next to findings: say so
                self.progress.say(f"error while fuzzing (not a finding): {type(err).__name__}: {err}")
            for f in self._pending.values():
                f.flaky = f.flaky or flaky
        else:
            self._chunk_time(chunk_began, turns_before, cpu_before)
        for f in sorted(self._pending.values(), key=lambda f: len(f.signature)):
            if f.flaky and not self._judge_flaky(f, worker):
                continue
            if not self._is_known(f):
                self._found(f)

    def _warm_up(self, worker: Any, bundle: Bundle, pool: list[str]) -> None:
        """The first turn of every program on every process of a pool, before the search: the SDK's
        code paths are loaded and each process's answer times known (workers.Latency) before a
        turn's silence is judged by them."""
        warm = getattr(worker, "warm_up", None)
        if warm is None:
            return
        began = time.monotonic()
        cases = []
        for i, name in enumerate(pool):
            run = run_program(getattr(worker, "bundle", bundle), name, None, RandomChooser(random.Random(i)),
                              instance_id=f"warm-up-{i}", max_turns=1)
            cases += run.cases[:1]
        self.timeline.add(Stage.WARMUP, seconds=0.0, turns=warm(cases))
        self.timeline.add(Stage.WARMUP, seconds=time.monotonic() - began)

    def _shrunk_enough(self) -> bool:
        """A finding is shrunk for at most a quarter of a time budget (5 s at least): every shrink
        step runs a whole example on the worker, and a flaky one would take the whole budget."""
        if self._first_finding is None or self.budget.seconds is None:
            return False
        return time.monotonic() - self._first_finding[0] > max(5.0, 0.25 * self.budget.seconds)

    def _same_answer(self, kind: str) -> Callable[[pb.WorkflowResponse | None, pb.WorkflowResponse | None], bool]:
        """How a finding of `kind` compares two answers to one turn (a campaign may judge less)."""
        return same_answer

    def _judge_flaky(self, f: "Finding", worker: WorkerUnderTest) -> bool:
        """A finding Hypothesis could not reproduce on every replay is judged by asking the worker the
        same turn again (FLAKY_REPLAYS times): two different answers are the SDK answering one history
        two ways (RPL-DET-001, both answers kept); the recorded answer every time is a difference that
        reproduces (the flakiness was in the schedule around it); another answer every time means the
        recorded one was lost or delayed on the way: the harness's, not a finding (False)."""
        answers = [worker.answer(f.case) for _ in range(FLAKY_REPLAYS)]
        same = self._same_answer(f.kind)
        if any(not same(answers[0], a) for a in answers[1:]):
            other = next(a for a in answers[1:] if not same(answers[0], a))
            f.kind, f.requirement, f.level = "self-determinism", "RPL-DET-001", "MUST"
            f.got, f.other, f.flaky = answers[0], other, False
            f.judged = (f"the SDK answered the same turn two ways in {FLAKY_REPLAYS} replays (RPL-DET-001): "
                        f"{_gist(answers[0])} / {_gist(other)}")
        elif same(f.got, answers[0]):
            f.flaky = False
            f.judged = f"reproduced: the same answer in {FLAKY_REPLAYS} replays (the schedule around it varied)"
        else:
            self.progress.count("harness-flaky")
            self.progress.say(f"not a finding: {f.headline()} did not reproduce ({FLAKY_REPLAYS} replays gave "
                              "another answer, the same each time): the recorded answer was lost or delayed")
            return False
        self.progress.say(f"flaky finding judged: {f.headline()}: {f.judged}")
        return True

    def _turns(self) -> int:
        return self.progress.counters.get("turns", 0)

    def _chunk_time(self, began: float, turns_before: int, cpu_before: float) -> None:
        """A chunk's wall time (Hypothesis included) as search, up to its first finding; after it
        (shrinking, Hypothesis' search around it) on its own. Warm-up was already moved out."""
        end, turns, cpu = time.monotonic(), self._turns(), time.process_time()
        cut, cut_turns, cut_cpu = self._first_finding or (end, turns, cpu)
        self.timeline.add(Stage.SEARCH, seconds=cut - began, turns=cut_turns - turns_before, cpu=cut_cpu - cpu_before)
        if self._first_finding is not None:
            self.timeline.add(Stage.SHRINK, seconds=end - cut, turns=turns - cut_turns, cpu=cpu - cut_cpu)

    def _is_known(self, f: "Finding") -> bool:
        """Known when this exact kind of difference was found, or when every part of it was (a
        difference made only of known parts is not new)."""
        if f.key in self.known:
            return True
        parts = set(f.signature.split("; "))
        seen = {p for k in self.known if k.startswith(f.kind + ": ") for p in k[len(f.kind) + 2:].split("; ")}
        return parts <= seen

    def _found(self, f: Finding) -> None:
        self.known.add(f.key)
        self.findings.append(f)
        self.progress.say(f"finding {len(self.findings)}: {f.headline()}" + (" (flaky)" if f.flaky else ""))
        if self.on_finding is not None:
            self.on_finding(f)

    # ------------------------------------------------------------------ one example

    def _example(self, c: DataChooser, data: Any, bundle: Bundle, pool_doc: dict[str, Any], pool: list[str],
                 worker: WorkerUnderTest, reference: ReferenceWorker, rnd: int) -> None:
        workflow = pool[c.int(0, len(pool) - 1)]
        value = data.draw(P.inputs)
        iid = pick(c, INSTANCE_IDS)
        run = run_program(bundle, workflow, value, c, instance_id=iid, events=self.features.events,
                          suspend=self.features.suspend, segments=chance(c, 20), max_turns=self.max_turns)
        cases = list(run.cases)
        note = f"program {workflow}, input {value!r}, instance {iid}, {len(run.cases)} turn(s), end {run.end}"
        if self.mutations and cases and chance(c, 40):
            base = pick(c, cases)
            mutated = mutate(c, base, rounds=1 + int(chance(c, 30)))
            if mutated is not None:
                cases.append(mutated)
        self.arrival.observe(bundle, [run], [x for x in cases if x.form == "mutated"])
        twice = c.int(0, len(cases) - 1) if cases else -1
        for i, case in enumerate(cases):
            self.progress.count("turns")
            self._check(case, i == twice, bundle, pool_doc, workflow, worker, reference, rnd, note)

    def _check(self, case: TurnCase, twice: bool, bundle: Bundle, pool_doc: dict[str, Any], workflow: str,
               worker: WorkerUnderTest, reference: ReferenceWorker, rnd: int, note: str) -> None:
        case = self.dialect.turn(case)  # the turn as the target's dialect writes it (the worker gets it id-shifted)
        raw = reference_answer(bundle, case)
        ref = self.dialect.reference(raw, case)
        again = self.dialect.reference(reference.answer(case), case)
        if again.SerializeToString(deterministic=True) != ref.SerializeToString(deterministic=True):
            cmp = compare(ref, again)
            self._report("reference-determinism", cmp, case, workflow, pool_doc, ref, again, rnd, note, raw=raw)
        if case.form != "mutated" and _stale(raw, case):
            # The reference itself answers with ids already in history (the engine rejects that as a
            # stale turn, R3.14): after a suspension the worker holds back its own recorded events
            # and makes their actions again. Both answers would be thrown away; not compared.
            self.progress.count("stale-not-compared")
            return
        got = worker.answer(case) if worker is not None else None
        mode = "kind" if case.form == "mutated" else "strict"
        cmp = compare(ref, got, mode=mode, profile=self.profile)
        if len(self._sample) < 60 and random.Random(self.clock.examples).random() < 0.3:
            self._sample.append((case, got, workflow))
        if not cmp.equal:
            kind = "no-answer" if got is None else "differential"
            self._report(kind, cmp, case, workflow, pool_doc, ref, got, rnd, note, worker=worker, raw=raw)
        if twice and got is not None:
            got2 = worker.answer(case)
            cmp2 = compare(got, got2, profile=EXACT) if got2 is not None else compare(got, None)
            if not cmp2.equal:
                self._report("determinism", cmp2, case, workflow, pool_doc, ref, got2, rnd, note, worker=worker,
                             raw=raw)

    def _report(self, kind: str, cmp: Comparison, case: TurnCase, workflow: str, pool_doc: dict[str, Any],
                ref: pb.WorkflowResponse, got: pb.WorkflowResponse | None, rnd: int, note: str,
                *, worker: Any = None, raise_: bool = True, raw: pb.WorkflowResponse | None = None) -> None:
        signature = cmp.signature()
        f = Finding(target=self.target if not kind.startswith("reference") else "reference", kind=kind,
                    signature=signature, case=case, workflow=workflow, bundle_doc=pool_doc, ref=ref, got=got,
                    comparison=cmp, seed=self.seed, round=rnd,
                    example=note + (f"; mutation {case.note}" if case.note else "") + f"; form {case.form}",
                    stderr=worker.stderr_tail() if kind == "no-answer" and hasattr(worker, "stderr_tail") else "",
                    raw=raw if raw is not None else ref)
        if self._is_known(f):
            return
        first = self._pending.get(f.key)
        f.at_example = first.at_example if first is not None else self.clock.examples
        if not raise_:
            self._found(f)
            return
        self._pending[f.key] = f
        raise finding_error(f.key)(f)

    # ------------------------------------------------------------------ fresh processes

    def _fresh_process(self, rnd: int, bundle: Bundle, pool_doc: dict[str, Any], worker: WorkerUnderTest) -> None:
        sample = [s for s in self._sample if s[1] is not None]
        if not sample:
            return
        self.progress.say(f"round {rnd}: the same {len(sample)} turn(s) on a fresh worker process")
        try:
            worker.restart()
        except Exception as exc:  # noqa: BLE001 - reported as the progress line; the round is over anyway
            self.progress.say(f"could not restart {self.target}: {exc}")
            return
        for case, got, workflow in sample:
            again = worker.answer(case)
            cmp = compare(got, again, profile=EXACT) if again is not None else compare(got, None)  # type: ignore[arg-type]
            if not cmp.equal:
                ref = self.dialect.reference(reference_answer(bundle, case), case)
                self._report("determinism-fresh-process", cmp, case, workflow, pool_doc, ref, again, rnd,
                             "the same turn, answered by a restarted worker", worker=worker, raise_=False)
        fresh = SubprocessReference(pool_doc, hash_seed=seed_for("hash", self.seed, rnd) % 4_000_000_000)
        cases = [s[0] for s in sample]
        for case, answer, (_c, _g, workflow) in zip(cases, fresh.answer_many(cases), sample):
            ref = reference_answer(bundle, case)
            cmp = compare(ref, answer) if answer is not None else compare(ref, None)
            if not cmp.equal:
                self._report("reference-fresh-process", cmp, case, workflow, pool_doc, ref, answer, rnd,
                             "the same turn, answered by the reference executor in a fresh process", raise_=False)


def round_pool(*, seed: int, rnd: int, size: int, features: P.Features) -> dict[str, Any]:
    """The program pool of round `rnd` of a campaign with `seed` (the same in every shard)."""
    return P.sample_pool(seed_for("pool", seed, rnd), size, features)


FLAKY_REPLAYS = 4


def _gist(resp: pb.WorkflowResponse | None) -> str:
    if resp is None:
        return "no answer"
    kinds = [a.WhichOneof("workflowActionType") or "?" for a in resp.actions]
    return "[" + ", ".join(kinds) + "]"


def same_answer(a: pb.WorkflowResponse | None, b: pb.WorkflowResponse | None) -> bool:
    """Two answers of the worker to one turn are the same answer (exactly)."""
    if a is None or b is None:
        return a is b
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def _stale(resp: pb.WorkflowResponse, case: TurnCase) -> bool:
    return bool(stale(resp.actions, case.past))  # the engine's own rule (R3.14), not a copy


def known_from(paths: Iterable[Path], target: str) -> set[str]:
    """Finding keys already written as regression scenarios for `target` (their `# fuzz-key:` line)."""
    out = set()
    for p in paths:
        try:
            text = p.read_text(encoding="utf-8")
        except OSError:
            continue
        if f"# fuzz-target: {target}\n" not in text:
            continue
        for line in text.splitlines():
            if line.startswith("# fuzz-key: "):
                out.add(line[len("# fuzz-key: "):])
    return out


__all__ = ["Finding", "FindingError", "WorkerCampaign", "known_from", "round_pool"]
