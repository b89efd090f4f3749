"""pytest plugin: scenario files under a `scenarios/` folder are collected as test items.

    pytest scenarios/                                   # the reference pair
    pytest scenarios/ --conformance-worker dapr-ext-workflow
    pytest scenarios/ --conformance-requirement ACT-ALO-001

Each item runs one scenario on one pair in its own sidecar and worker, so items
are independent and safe under pytest-xdist. A declared gap or a missing
capability is reported as a skip that names the gap; it never hides a failure of
a requirement the target claims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "taskhub-conformance scenarios")
    group.addoption("--conformance-sidecar", action="append", default=[], metavar="NAME",
                    help="sidecar target(s) from targets.yaml (default: reference)")
    group.addoption("--conformance-worker", action="append", default=[], metavar="NAME",
                    help="worker target(s) from targets.yaml (default: reference)")
    group.addoption("--conformance-sidecar-address", default=None, metavar="HOST:PORT")
    group.addoption("--conformance-worker-command", default=None, metavar="CMD")
    group.addoption("--conformance-requirement", action="append", default=[], metavar="ID",
                    help="only scenarios covering these requirement ids")


def _scenario_root(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.name == "scenarios":
            return parent
    return None


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix == ".yaml" and _scenario_root(file_path) is not None:
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def _pairs(config: pytest.Config) -> list[Any]:
    cached = getattr(config, "_conformance_pairs", None)
    if cached is None:
        from conformance.targets.registry import load_targets

        targets = load_targets()
        cached = [targets.pair(s, w, sidecar_address=config.getoption("conformance_sidecar_address"),
                               worker_command=config.getoption("conformance_worker_command"))
                  for s in config.getoption("conformance_sidecar") or ["reference"]
                  for w in config.getoption("conformance_worker") or ["reference"]]
        config._conformance_pairs = cached  # type: ignore[attr-defined]
    return cached


class ScenarioFile(pytest.File):
    def collect(self):  # type: ignore[override]
        from conformance.errors import InputError
        from conformance.scenario.loader import load_scenario

        root = _scenario_root(self.path)
        assert root is not None
        try:
            scenario = load_scenario(self.path, root=root)
        except InputError as exc:
            raise self.CollectError(exc.render()) from None
        wanted = self.config.getoption("conformance_requirement")
        if wanted and not set(wanted) & set(scenario.requirements):
            return
        for pair in _pairs(self.config):
            if pair.direction == "self" or pair.direction in scenario.applies_to:
                yield ScenarioItem.from_parent(self, name=pair.label, scenario=scenario, pair=pair)

    class CollectError(Exception):
        pass


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Any, pair: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario, self.pair = scenario, pair
        for req in scenario.requirements:
            self.add_marker(pytest.mark.requirement(req))

    def runtest(self) -> None:
        from conformance.reproduce import reproduce_command
        from conformance.runner.execute import run_scenario

        result = run_scenario(self.scenario, self.pair, reproduce=reproduce_command(self.scenario.id, sidecar=self.pair.sidecar.name,
                                                                                worker=self.pair.worker.name))
        self.user_properties.append(("requirements", " ".join(self.scenario.requirements)))
        outcome = result.outcome.value
        if outcome in ("KNOWN_FAILURE", "NOT_APPLICABLE"):
            pytest.skip(f"{outcome}: {result.gap_reason}")
        if outcome in ("WARNING", "OBSERVATION"):  # not a MUST broken: shown, never a failure
            self.user_properties.append((outcome.lower(), result.message))
            return
        if outcome != "PASSED":
            raise ScenarioFailed(result.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        line = self.scenario.span.line - 1 if self.scenario.span else 0
        return self.path, line, f"{self.scenario.id} [{self.pair.label}]"


class ScenarioFailed(AssertionError):
    pass


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(id): the requirement ids a scenario covers")
