"""Every generated arrival scenario (scenarios/arrival/) is what its recipe writes, passes on the
reference pair and still reaches each cell its recipe names."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.arrival import generate
from conformance.arrival.collect import reach
from conformance.scenario.loader import load_scenario
from conformance.targets.registry import load_targets

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "scenarios" / "arrival"


def test_files_match_their_recipes():
    assert generate.stale(FOLDER) == [], "run python -m conformance.arrival.generate"


@pytest.mark.parametrize("recipe", generate.all_recipes(), ids=lambda r: r.name)
def test_generated_scenario_reaches_its_cells(recipe):
    scenario = load_scenario(FOLDER / f"{recipe.name}.yaml", root=ROOT / "scenarios")
    got = reach(scenario, load_targets().pair("reference", "reference"))
    assert got.outcome == "PASSED", got
    missing = [str(c) for c in recipe.cells if c not in got.cells]
    assert not missing, f"{recipe.name} no longer reaches {missing}; it reaches {sorted(map(str, got.cells))}"


def test_late_timer_recipes_use_the_engine_setting():
    """The late-timer recipes are written (the hook is set) and ask for the engine setting."""
    assert generate.LATE_OPTION is not None
    names = {r.name for r in generate.all_recipes()}
    for recipe in generate.late_recipes(generate.LATE_OPTION):
        assert recipe.name in names and recipe.engine == generate.LATE_OPTION
