"""Which files of each Python SDK hold its orchestration executor, and which parts of them are mutated.

The three Python SDK targets run one executor (durabletask-python's): durabletask-dapr installs it as
the `durabletask` package, dapr-ext-workflow 1.18 and dapr 1.19 vendor it as
`dapr.ext.workflow._durabletask`. Mutated: the replay context and the executor of worker.py (the
gRPC plumbing and the activity executor are not the orchestration executor) and all of task.py
(the task objects, composites and retry logic the executor resolves).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

WORKER_CLASSES = ("_RuntimeOrchestrationContext", "_OrchestrationExecutor")


@dataclass(frozen=True, slots=True, kw_only=True)
class SdkSpec:
    name: str  # the worker target's name (conformance/targets/targets.yaml, drivers/*/target.yaml)
    venv: str  # its environment under the library root's .sdk/ (scripts/install-sdks.sh)
    package: str  # the executor's package, as a path inside site-packages


SDKS: dict[str, SdkSpec] = {
    "dapr-ext-workflow": SdkSpec(name="dapr-ext-workflow", venv="dx", package="dapr/ext/workflow/_durabletask"),
    "durabletask-dapr": SdkSpec(name="durabletask-dapr", venv="dd", package="durabletask"),
    "dapr": SdkSpec(name="dapr", venv="dapr", package="dapr/ext/workflow/_durabletask"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """A file to mutate and the line ranges (inclusive) of it that are mutated."""

    relpath: str  # inside site-packages, e.g. durabletask/worker.py
    ranges: tuple[tuple[int, int], ...]

    def holds(self, line: int) -> bool:
        return any(a <= line <= b for a, b in self.ranges)


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise FileNotFoundError(f"{venv} has no lib/python3*/site-packages: not a Python environment")
    return found[0]


def scopes(spec: SdkSpec, *, venv: Path) -> tuple[Scope, ...]:
    """The executor's scopes in the environment `venv` (the classes are found by name, so a release
    whose line numbers moved is mutated the same way)."""
    base = site_packages(venv)
    worker = f"{spec.package}/worker.py"
    tree = ast.parse((base / worker).read_text(encoding="utf-8"))
    ranges = tuple((node.lineno, node.end_lineno or node.lineno) for node in tree.body
                   if isinstance(node, ast.ClassDef) and node.name in WORKER_CLASSES)
    missing = set(WORKER_CLASSES) - {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if missing:
        raise ValueError(f"{base / worker}: no class {', '.join(sorted(missing))}; not the executor this knows")
    task = f"{spec.package}/task.py"
    task_lines = len((base / task).read_text(encoding="utf-8").splitlines())
    return (Scope(relpath=worker, ranges=ranges), Scope(relpath=task, ranges=((1, task_lines),)))
