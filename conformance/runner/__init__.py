"""Runs scenarios on target pairs and emits the event stream every report consumes."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from conformance.reproduce import Invocation, reproduce_command
from conformance.events import Event, RunFinished, RunStarted, ScenarioFinished, ScenarioStarted
from conformance.runner.execute import run_scenario
from conformance.runner.isolation import EngineLock, engine_turn
from conformance.runner.slots import Slots, holding, lends, longest_first, real_time_guess
from conformance.scenario.model import Direction, Scenario
from conformance.targets.base import Pair
from conformance.verdict import SCENARIO_OUTCOMES

if TYPE_CHECKING:
    from conformance.runner.processes import ChildRun

Sink = Callable[[Event], None]

@dataclass(frozen=True)
class Plan:
    """Which scenario runs on which pair; directions a scenario does not apply to are left out."""

    items: tuple[tuple[Scenario, Pair], ...]

    @classmethod
    def build(cls, scenarios: Sequence[Scenario], pairs: Sequence[Pair]) -> "Plan":
        # The self-check runs everything: the reference pair must pass every scenario.
        return cls(tuple((s, p) for p in pairs for s in scenarios
                         if p.direction is Direction.SELF or p.direction in s.applies_to))

def run_item(item: tuple[Scenario, Pair], *, emit: Sink, locks: dict[str, EngineLock], work_root: Path | None,
             invocation: Invocation) -> ScenarioFinished:
    """One scenario of a plan, its ScenarioStarted and ScenarioFinished emitted on the calling thread."""
    scenario, pair = item
    with engine_turn(pair, scenario, locks):
        emit(ScenarioStarted(scenario=scenario.id, pair=pair.label))
        result = run_scenario(scenario, pair, work_root=work_root,
                              reproduce=reproduce_command(scenario.id, sidecar=pair.sidecar.name,
                                                          worker=pair.worker.name, invocation=invocation))
    emit(result)
    return result

def run_plan(plan: Plan, *, sinks: Sequence[Sink], jobs: int = 4, work_root: Path | None = None,
             command: str = "conformance run", invocation: Invocation = Invocation(),
             children: "ChildRun | None" = None,
             durations: Mapping[tuple[str, str], float] | None = None) -> list[ScenarioFinished]:
    """Run `plan`, `jobs` scenarios at work at once (any number waiting), in this process, or with
    `children` in child processes that prepare the same run (conformance/runner/processes.py); the sinks
    see the same events either way. `durations` ((scenario, pair) -> seconds, the last run's) starts the
    longest first in this process (conformance/runner/slots.py)."""
    durations = durations or {}
    run_id = uuid.uuid4().hex[:12]
    began_wall, began = time.time(), time.monotonic()
    pairs = tuple(dict.fromkeys(p.label for _, p in plan.items))

    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    emit(RunStarted(run_id=run_id, started_at=began_wall, pairs=pairs, scenario_count=len(plan.items),
                    command=command))
    if children is not None:
        from conformance.runner.processes import run_in_processes

        results = run_in_processes(plan.items, emit=emit, setup=children)
    else:
        locks: dict[str, EngineLock] = {}
        slots = Slots(jobs)  # conformance/runner/slots.py: `jobs` at work at once, any number waiting

        def run_admitted(item: tuple[Scenario, Pair]) -> ScenarioFinished:
            with holding(slots, lend=lends(item[1])):
                return run_item(item, emit=emit, locks=locks, work_root=work_root, invocation=invocation)

        order = longest_first([(s.id, p.label) for s, p in plan.items], durations,
                              guesses=[real_time_guess(s) for s, _ in plan.items])
        with ThreadPoolExecutor(max_workers=max(1, len(plan.items)), thread_name_prefix="scenario") as pool:
            futures = {}
            for i in order:
                slots.admit()
                futures[i] = pool.submit(run_admitted, plan.items[i])
            results = [futures[i].result() for i in range(len(plan.items))]
    counts = Counter(r.outcome.value for r in results)
    emit(RunFinished(run_id=run_id, finished_at=time.time(), duration_s=time.monotonic() - began,
                     counts={o.value: counts.get(o.value, 0) for o in SCENARIO_OUTCOMES}))
    return results
