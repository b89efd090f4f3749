"""The self-oracle fuzzer finds broken workers from the contract alone, and leaves legitimate variation alone.

Each worker below answers from the reference executor with one change, in-process
(`workers.FunctionWorker`); the campaign is told nothing about the change, runs a bounded,
derandomized number of examples, and must report it with the right kind and level. The
reference worker itself yields no finding, and a worker that only numbers or orders its actions
differently yields observations (the differential report), never a finding.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import replace

import pytest

from fake_worker.replay import TurnResult, execute
from taskhub_wire import pb

from conformance.fuzz.common import Budget
from conformance.dialects.history import _renumber, _renumber_action
from conformance.reporting.differential import DifferentialReport, add_difference, load
from conformance.fuzz.self_oracle import SelfOracleCampaign, completion
from conformance.fuzz.workers import FunctionWorker, ReferenceWorker
from tests.mutants.variants import WORKER_MUTATIONS

EXAMPLES = 300


@pytest.fixture(autouse=True)
def quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def campaign(name: str, make) -> SelfOracleCampaign:
    return SelfOracleCampaign(target=f"mutant:{name}", budget=Budget(examples=EXAMPLES), derandomize=True,
                              make_worker=make, fresh_process=False, database=None)


def _drops_falsy_output(result: TurnResult, history: object) -> TurnResult:
    """dapr-ext-workflow's defect: a falsy workflow output (0, "", false, []) is sent as no output."""
    for a in result.actions:
        if a.HasField("completeWorkflow") and a.completeWorkflow.result.value in ("0", '""', "false", "[]", "{}"):
            a.completeWorkflow.ClearField("result")
    return result


def _flip_flop() -> object:
    """Every other answer carries a custom status: the same turn is not answered the same way twice."""
    counter = itertools.count()

    def transform(result: TurnResult, history: object) -> TurnResult:
        return replace(result, custom_status="odd") if next(counter) % 2 else result

    return transform


class Renumbering:
    """Legitimate variation: action ids 100 higher (ids are opaque). It reads its own histories back
    100 lower, so it replays every history it wrote."""

    name = "renumbers"

    def __init__(self, bundle) -> None:
        self.bundle = bundle

    def answer(self, case):
        def down(i: int) -> int:
            return i - 100 if i > 100 else i

        past = tuple(_renumber(e, down, case.instance_id) for e in case.past)
        new = tuple(_renumber(e, down, case.instance_id) for e in case.new)
        resp = execute(self.bundle, instance_id=case.instance_id, past=past, new=new).response(
            instance_id=case.instance_id, completion_token="")
        for a in resp.actions:
            _renumber_action(a, lambda i: i + 100 if i > 0 else i, case.instance_id)
        return resp

    def restart(self) -> None:
        return None

    def close(self) -> None:
        return None


class LosesResults(Renumbering):
    """Answers nothing to a turn that delivers an activity result (the result is lost)."""

    name = "loses-results"

    def answer(self, case):
        if any(e.HasField("taskCompleted") for e in case.new):
            return pb.WorkflowResponse(instanceId=case.instance_id)
        return ReferenceWorker(self.bundle).answer(case)


def test_reference_worker_has_no_finding():
    c = campaign("reference", lambda bundle, doc: ReferenceWorker(bundle))
    findings = c.run()
    assert not findings, "\n".join(f.headline() + "\n" + f.example for f in findings)
    assert c.progress.counters["turns"] > EXAMPLES  # every turn of every history, and its replays
    assert not c.differential.groups, c.differential.to_markdown()


def test_shared_task_execution_ids_break_the_contract():
    mutation = WORKER_MUTATIONS["reuses-task-execution-ids"]
    findings = campaign("reuses", lambda bundle, doc: FunctionWorker(bundle, mutation, name="reuses")).run()
    kinds = {(f.kind, f.level, f.requirement) for f in findings}
    assert ("task-execution-ids", "MUST", "ACT-TEID-003") in kinds, kinds


def test_reordered_actions_are_an_observation_not_a_finding():
    """The contract does not order a turn's actions (ids link operations and results): a worker that
    sends them in reverse is held to its own answers and passes, and the report shows the difference."""
    mutation = WORKER_MUTATIONS["reorders-actions"]
    c = campaign("reorders", lambda bundle, doc: FunctionWorker(bundle, mutation, name="reorders"))
    assert c.run() == []
    assert any(field.startswith("actions") for field, _sdk in c.differential.groups)


def test_dropped_falsy_output_is_a_semantics_finding():
    findings = campaign("drops-falsy", lambda bundle, doc: FunctionWorker(bundle, _drops_falsy_output,
                                                                          name="drops-falsy")).run()
    sem = [f for f in findings if f.kind == "semantics"]
    assert sem and sem[0].level == "MUST", [f.headline() for f in findings]
    # The dropped value is a completion's output or a continue-as-new's input (the same result field).
    assert "completion.output" in sem[0].signature or "completion.newInput" in sem[0].signature, sem[0].signature


def test_an_answer_that_changes_on_replay_is_a_self_determinism_finding():
    findings = campaign("flip-flop", lambda bundle, doc: FunctionWorker(bundle, _flip_flop(), name="flip")).run()
    assert any(f.kind == "self-determinism" and f.level == "MUST" for f in findings), \
        [f.headline() for f in findings]


def test_a_lost_result_is_found():
    findings = campaign("loses-results", lambda bundle, doc: LosesResults(bundle)).run()
    assert {"lost-progress", "semantics"} & {f.kind for f in findings}, [f.headline() for f in findings]
    assert all(f.level == "MUST" for f in findings)


def test_other_action_ids_are_legitimate_variation():
    c = campaign("renumbers", lambda bundle, doc: Renumbering(bundle))
    assert c.run() == []
    assert ("actions[].id", "mutant:renumbers") in c.differential.groups


def test_completion_reads_the_first_completion_as_the_engine_does():
    resp = pb.WorkflowResponse()
    a = resp.actions.add(id=1)
    a.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_COMPLETED
    a.completeWorkflow.result.value = "0"
    b = resp.actions.add(id=2)
    b.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_FAILED
    assert completion(resp) == ("COMPLETED", 0)
    assert completion(pb.WorkflowResponse()) is None


def test_differential_report_groups_by_field_and_sdk(tmp_path):
    report = DifferentialReport()
    report.compared(sdk="durabletask-java", n=3)
    for i in range(3):
        add_difference(sdk="durabletask-java", path=f"actions[{i}].id", reference=i + 1, got=i, source="vectors/x",
                       report=report)
    add_difference(sdk="durabletask-js", path="customStatus", reference=None, got="", source="fuzz seed 1",
                   report=report)
    md, js = report.write(tmp_path)
    back = load(js)
    g = back.groups[("actions[].id", "durabletask-java")]
    assert (g.count, g.example["reference"], g.example["sdk"]) == (3, 1, 0)
    text = md.read_text(encoding="utf-8")
    assert "| `actions[].id` | durabletask-java | 3 |" in text and "never verdicts" in text
    report.write(tmp_path, merge_existing=True)
    assert load(js).groups[("actions[].id", "durabletask-java")].count == 6


def test_a_broken_differential_file_is_a_clear_error(tmp_path):
    path = tmp_path / "differential.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a differential report"):
        load(path)


def test_histories_run_together_draw_the_same_schedule_every_time():
    """run_programs steps several schedules in lock step: the same choices and answers give the same
    histories, however the answers were computed (here: a pool of threads, in any order)."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    from taskhub_programs import parse_bundle

    from conformance.fuzz import programs as P
    from conformance.fuzz.interleave import Program, RandomChooser, run_programs

    doc = P.sample_pool(3, 8)
    bundle = parse_bundle({"programs": doc})
    names = sorted(n for n in doc if n.startswith("p"))
    worker = ReferenceWorker(bundle)

    def answer_many(jobs):
        with ThreadPoolExecutor(max_workers=4) as ex:
            return list(ex.map(lambda job: worker.answer(job[1]), jobs))

    def once():
        programs = [Program(names[k % len(names)], k, f"fz-{k}") for k in range(4)]
        runs = run_programs(bundle, programs, RandomChooser(random.Random(7)), answer_many, perturb=True)
        return [[(c.past, c.new, c.got.SerializeToString(deterministic=True)) for c in r.cases] for r in runs]

    first = once()
    assert first == once()
    assert sum(len(r) for r in first) > 4


def test_perturbed_turns_are_recognised():
    from conformance.dialects.turn import TurnCase
    from conformance.fuzz.self_oracle import perturbed

    def ev(kind: str) -> pb.HistoryEvent:
        e = pb.HistoryEvent(eventId=-1)
        getattr(e, kind).SetInParent()
        return e

    plain = TurnCase("i", (ev("executionStarted"),), (ev("executionSuspended"), ev("executionResumed")), "dispatched")
    twice = TurnCase("i", (ev("executionSuspended"),), (ev("executionSuspended"),), "dispatched")
    stray = TurnCase("i", (ev("executionStarted"),), (ev("executionResumed"),), "dispatched")
    assert not perturbed(plain) and perturbed(twice) and perturbed(stray)


def test_same_bytes_skips_only_answers_compare_finds_equal():
    """The replays' fast path: answers equal but for their completion tokens need no compare();
    any other difference still goes to it, and compare() tells them apart."""
    from conformance.dialects.compare import compare
    from conformance.fuzz.self_oracle import same_bytes

    a = pb.WorkflowResponse(instanceId="i", completionToken="vector-1")
    a.actions.add(id=1).scheduleTask.name = "echo"
    b = pb.WorkflowResponse()
    b.CopyFrom(a)
    b.completionToken = "vector-2"
    assert same_bytes(a, b) and compare(a, b).equal
    assert b.completionToken == "vector-2"  # the answer itself is left as it came
    c = pb.WorkflowResponse()
    c.CopyFrom(b)
    c.actions[0].scheduleTask.name = "other"
    assert not same_bytes(a, c) and not compare(a, c).equal
