"""Scenarios sharing one engine (`--sidecar address`) stay apart: each gets its own work items.

Every scenario below names its workflow `main` and its worker knows only its own `main`; the
engine hands work items to whichever worker stream it likes, so without routing by instance
(conformance/proxy/routing.py) the workers run each other's turns and the outputs mix.

The ledger asks for no execution of another scenario's activity (`unexpected: 0`), not for exactly
one: an item out on a stream that closes when its scenario ends is dispatched again (at least once).
One such case was ours and is fixed: the proxy counted a routed item done before its completion had
reached the engine, so the lingering stream that carried it could end first (tests/proxy).
"""

from __future__ import annotations

from pathlib import Path

from conformance.events import Outcome
from conformance.proxy.routing import WorkItemRouter
from conformance.runner import Plan, run_plan
from conformance.scenario.loader import load_scenario
from conformance.targets.reference import start_reference_sidecar
from conformance.targets.registry import load_targets

_SCENARIO = """\
title: scenario {n} of several sharing one engine
requirements: [ACT-RESULT-001]
programs:
  main:
    steps:
      - call_activity: {{name: sleep, input: 0.2}}
      - call_activity: {{name: echo, input: "{n}-a"}}
        as: a
      - call_child: {{workflow: helper, input: "${{a}}"}}
        as: b
      - call_activity: {{name: record, input: "{n}"}}
      - return: "${{b}}"
  helper:
    steps:
      - call_activity: {{name: echo, input: {{$concat: ["${{input}}", "-child{n}"]}}}}
        as: c
      - return: "${{c}}"
start: {{workflow: main}}
expect:
  status: COMPLETED
  output: "{n}-a-child{n}"
ledger: {{ok: 1, unexpected: 0}}
timeout: 60s
"""


def test_scenarios_sharing_one_engine_each_run_their_own_work(tmp_path: Path) -> None:
    root = tmp_path / "scenarios"
    (root / "shared").mkdir(parents=True)
    scenarios = []
    for n in range(4):
        path = root / "shared" / f"s{n}.yaml"
        path.write_text(_SCENARIO.format(n=n), encoding="utf-8")
        scenarios.append(load_scenario(path, root=root))
    engine = start_reference_sidecar(options={}, work_dir=tmp_path)
    try:
        pair = load_targets().pair("address", "reference", sidecar_address=engine.address)
        results = run_plan(Plan(tuple((s, pair) for s in scenarios)), sinks=[], jobs=4, work_root=tmp_path)
    finally:
        engine.stop()
    assert [(r.scenario, r.outcome, r.message) for r in results] == \
        [(s.id, Outcome.PASSED, "") for s in scenarios]


class _Owner:
    def __init__(self) -> None:
        self.got: list[bytes] = []

    def accept_routed(self, raw: bytes) -> None:
        self.got.append(raw)


def test_router_owns_default_child_ids_and_forgets_finished_owners() -> None:
    router = WorkItemRouter()
    a, b = _Owner(), _Owner()
    router.attach(a)
    router.attach(b)
    router.claim(a, "main-x-1")
    router.claim(b, "main-y-2")
    assert router.route("main-x-1") == (a, False)
    assert router.route("main-x-1:0001") == (a, False)  # an SDK's default child id
    assert router.route("main-y-2:0003:0001") == (b, False)
    assert router.route("someone-else") == (None, False)
    router.release(a)
    assert router.route("main-x-1:0001") == (None, True)  # dropped, not handed to b's worker
    assert router.route("main-y-2") == (b, False)
    router.release(b)
    # Nobody attached: still retired, so the next scenario's worker does not get a leftover redelivery.
    assert router.route("main-y-2") == (None, True)
    c = _Owner()
    router.attach(c)
    router.claim(c, "main-y-2")  # the same id claimed again (a fixed id) is served again
    assert router.route("main-y-2") == (c, False)


def test_a_rerun_copy_is_claimed_for_the_scenario_that_asks_for_it() -> None:
    from conformance.runner.isolation import claimer
    from taskhub_wire import pb

    claimed: list[str] = []

    class _Proxy:
        def claim(self, iid: str) -> None:
            claimed.append(iid)

    claimer(_Proxy())(pb.RerunWorkflowFromEventRequest(sourceInstanceID="src-1", eventID=1, newInstanceID="copy-1"))
    assert sorted(claimed) == ["copy-1", "src-1"]
