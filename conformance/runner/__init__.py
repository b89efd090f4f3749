"""Runs scenarios on target pairs and emits the event stream every report consumes."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from conformance.reproduce import Invocation, reproduce_command
from conformance.events import Event, RunFinished, RunStarted, ScenarioFinished, ScenarioStarted
from conformance.runner.execute import run_scenario
from conformance.runner.isolation import EngineLock, engine_turn
from conformance.scenario.model import Direction, Scenario
from conformance.targets.base import Pair
from conformance.verdict import SCENARIO_OUTCOMES

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

def run_plan(plan: Plan, *, sinks: Sequence[Sink], jobs: int = 4, work_root: Path | None = None,
             command: str = "conformance run", invocation: Invocation = Invocation()) -> list[ScenarioFinished]:
    run_id = uuid.uuid4().hex[:12]
    began_wall, began = time.time(), time.monotonic()
    pairs = tuple(dict.fromkeys(p.label for _, p in plan.items))

    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    emit(RunStarted(run_id=run_id, started_at=began_wall, pairs=pairs, scenario_count=len(plan.items),
                    command=command))

    locks: dict[str, EngineLock] = {}

    def one(item: tuple[Scenario, Pair]) -> ScenarioFinished:
        scenario, pair = item
        with engine_turn(pair, scenario, locks):
            emit(ScenarioStarted(scenario=scenario.id, pair=pair.label))
            result = run_scenario(scenario, pair, work_root=work_root,
                                  reproduce=reproduce_command(scenario.id, sidecar=pair.sidecar.name,
                                                              worker=pair.worker.name, invocation=invocation))
        emit(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="scenario") as pool:
        results = list(pool.map(one, plan.items))
    counts = Counter(r.outcome.value for r in results)
    emit(RunFinished(run_id=run_id, finished_at=time.time(), duration_s=time.monotonic() - began,
                     counts={o.value: counts.get(o.value, 0) for o in SCENARIO_OUTCOMES}))
    return results
