"""The step registry (conformance/scenario/steps.py): the loader reads typed arguments from it and the
runner has one handler for each of its kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.runner.step_handlers import HANDLERS
from conformance.scenario import steps
from conformance.errors import InputError
from conformance.scenario.loader import load_scenario
from conformance.scenario.basics import MISSING
from conformance.scenario.placeholders import substitute

HEAD = """title: t
requirements: [RPL-DET-001]
programs: {main: {steps: [{return: 1}]}}
start: {workflow: main}
steps:
"""


def load(tmp_path: Path, steps_text: str):
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + steps_text, encoding="utf-8")
    return load_scenario(path, root=tmp_path)


def problems(tmp_path: Path, steps_text: str) -> list[tuple[int, str]]:
    with pytest.raises(InputError) as info:
        load(tmp_path, steps_text)
    return [(p.line, p.what) for p in info.value.problems]


def test_every_kind_has_a_handler_and_only_kinds_do():
    assert set(HANDLERS) == {kind.args for kind in steps.STEPS.values()}


def test_every_argument_class_is_frozen_and_keyword_only():
    for kind in steps.STEPS.values():
        params = kind.args.__dataclass_params__
        assert params.frozen, kind.name
        if steps.args_of(kind.args):
            with pytest.raises(TypeError):
                kind.args(*[None] * len(steps.args_of(kind.args)))  # positional arguments are refused


def test_steps_load_into_their_typed_arguments(tmp_path):
    s = load(tmp_path, """  - wait: {status: [RUNNING, COMPLETED], timeout: 2s}
  - sleep: 250ms
  - raise: {event: go, data: null}
  - call: {rpc: GetInstance, request: {instanceId: "${main}"}, expect: {response: {exists: true}}, metadata: {}}
  - restart_worker:
""")
    wait, sleep, raise_, call, restart = (step.args for step in s.steps)
    assert wait == steps.Wait(statuses=("RUNNING", "COMPLETED"), timeout=2.0)
    assert sleep == steps.Sleep(seconds=0.25)
    assert raise_ == steps.Raise(event="go", data=None)  # null is a payload, not an absent one
    assert call == steps.Call(rpc="GetInstance", request={"instanceId": "${main}"}, response={"exists": True},
                              metadata=())
    assert restart == steps.RestartWorker()
    assert [step.kind.name for step in s.steps] == ["wait", "sleep", "raise", "call", "restart_worker"]
    assert s.steps[2].args.instance == "main" and steps.Terminate().output is MISSING


def test_argument_types_are_checked_where_they_are_written(tmp_path):
    found = problems(tmp_path, """  - terminate: {recursive: "yes"}
  - call: {rpc: GetWorkItems}
  - suspend: {reason: 3}
""")
    assert found == [(6, "'recursive' must be a bool, not str"),
                     (7, "'GetWorkItems' is a streaming method; call takes a unary one: " + ", ".join(sorted(
                         n for n in steps._rpc_names()[0]))),
                     (8, "'reason' must be a str, not int")]


def test_a_step_start_takes_no_expect_error_of_its_own(tmp_path):
    found = problems(tmp_path, "  - start: {workflow: main, as: b, expect_error: NOT_FOUND}\n")
    assert len(found) == 1 and found[0][0] == 6
    assert found[0][1].startswith("unknown key 'expect_error' in step 'start'")


def test_one_substitution_for_ids_and_captured_values():
    ids, values = {"main": "main-1"}, {"n": 3, "main": "shadowed"}
    assert substitute("${n}", ids=ids, values=values) == 3  # a captured value keeps its type
    assert substitute({"a": ["x-${main}-${n}", "${nope}"]}, ids=ids, values=values) == {"a": ["x-main-1-3", "${nope}"]}
    assert substitute("${main}", ids=ids, values=values) == "main-1"  # an instance name wins
