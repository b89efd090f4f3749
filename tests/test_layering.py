"""The packages' dependency direction (docs/design.md §2), checked on every module's imports.

`taskhub_wire` is the bottom; `taskhub_core` (the protocol's pure rules) sits on it alone;
`fake_sidecar` and `fake_worker` sit on both and never import each other; `conformance` is on top and reaches the reference implementations only through
`conformance/targets/reference.py`. Imports are read with `ast` (function-level and relative ones
included), so nothing is imported to check them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("taskhub_wire", "taskhub_core", "fake_sidecar", "fake_worker", "conformance")
FAKES = ("fake_sidecar", "fake_worker")

# package -> the packages of this project it must not import
FORBIDDEN = {
    "taskhub_wire": frozenset({"taskhub_core", "fake_sidecar", "fake_worker", "conformance"}),
    # The protocol's pure rules, below both fakes: only taskhub_wire.
    "taskhub_core": frozenset({"fake_sidecar", "fake_worker", "conformance", "taskhub_programs"}),
    "fake_sidecar": frozenset({"fake_worker", "conformance"}),
    "fake_worker": frozenset({"fake_sidecar", "conformance"}),
}

# The one module of `conformance` meant to import the reference engine and worker.
CONFORMANCE_GATEWAY = "conformance/targets/reference.py"

# Debt of issue 10: modules of `conformance` that import fake_* today, outside the gateway, with
# the fake_* packages each one reaches. Shrink this table as the program language, the worker
# dialects and the engine's pure rules move into packages of their own; never grow it.
CONFORMANCE_DEBT = {
    "conformance/fuzz/cli.py": frozenset({"fake_sidecar", "fake_worker"}),
    "conformance/fuzz/engine_machine.py": frozenset({"fake_sidecar", "fake_worker"}),
    "conformance/fuzz/interleave.py": frozenset({"fake_worker"}),
    "conformance/fuzz/replay_worker.py": frozenset({"fake_worker"}),
    "conformance/fuzz/scenario_out.py": frozenset({"fake_worker"}),
    "conformance/fuzz/self_oracle.py": frozenset({"fake_worker"}),
    "conformance/fuzz/worker_fuzz.py": frozenset({"fake_worker"}),
    "conformance/fuzz/workers.py": frozenset({"fake_worker"}),
    "conformance/runner/execute.py": frozenset({"fake_worker"}),
    "conformance/scenario/loader.py": frozenset({"fake_worker"}),
    "conformance/scenario/model.py": frozenset({"fake_worker"}),
    "conformance/targets/base.py": frozenset({"fake_worker"}),
    # Issue 14: `conformance replay` serves histories through the reference engine (its turn rules
    # are taskhub_core's now).
    "conformance/replay/session.py": frozenset({"fake_sidecar"}),
}


def modules(root: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def imported(path: Path, *, root: Path) -> dict[str, int]:
    """Absolute names of the modules `path` imports -> the first line importing each."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = list(path.relative_to(root).parent.parts)
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                names = [".".join(base + ([node.module] if node.module else []))]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            found.setdefault(name, node.lineno)
    return found


def project_imports(path: Path, *, root: Path) -> dict[str, tuple[str, int]]:
    """This project's top-level packages imported by `path` (its own excluded) -> (module, line)."""
    own = path.relative_to(root).parts[0]
    out: dict[str, tuple[str, int]] = {}
    for name, line in imported(path, root=root).items():
        top = name.split(".")[0]
        if top in PACKAGES and top != own:
            out.setdefault(top, (name, line))
    return out


def violations(*, root: Path, debt: dict[str, frozenset[str]]) -> list[str]:
    problems = []
    for path in modules(root):
        name = path.relative_to(root).as_posix()
        own = name.split("/")[0]
        for top, (module, line) in sorted(project_imports(path, root=root).items()):
            if top in FORBIDDEN.get(own, ()):
                problems.append(f"{name}:{line}: {own} must not import {top} (imports {module})")
            elif own == "conformance" and top in FAKES and name != CONFORMANCE_GATEWAY:
                if top not in debt.get(name, ()):
                    problems.append(
                        f"{name}:{line}: conformance reaches {top} only through {CONFORMANCE_GATEWAY} "
                        f"(imports {module}); move the shared piece below both packages instead"
                    )
    return problems


def test_imports_follow_the_dependency_direction() -> None:
    problems = violations(root=ROOT, debt=CONFORMANCE_DEBT)
    assert not problems, "imports against the layering (docs/design.md §2):\n" + "\n".join(problems)


def test_the_debt_table_lists_only_live_exceptions() -> None:
    """A paid-off entry must leave CONFORMANCE_DEBT, so the table cannot hide a later regression."""
    stale = []
    for name, allowed in sorted(CONFORMANCE_DEBT.items()):
        path = ROOT / name
        reached = set(project_imports(path, root=ROOT)) & set(FAKES) if path.is_file() else set()
        if extra := sorted(allowed - reached):
            stale.append(f"{name}: no longer imports {', '.join(extra)}; remove it from CONFORMANCE_DEBT")
    assert not stale, "\n".join(stale)


def test_the_scan_sees_every_package() -> None:
    seen = {p.relative_to(ROOT).parts[0] for p in modules(ROOT)}
    assert seen == set(PACKAGES), f"packages without modules: {sorted(set(PACKAGES) - seen)}"


def test_every_shipped_package_has_a_place_in_the_layering() -> None:
    """A new package (say a pure core below both fakes) must be placed here before it ships."""
    # setup.py lists the packages it finds (the scenario library is shipped beside them as data).
    found = re.search(r"find_namespace_packages\(include=\[([^\]]*)\]", (ROOT / "setup.py").read_text(encoding="utf-8"))
    assert found, "setup.py no longer calls find_namespace_packages(include=[...]): update this test"
    shipped = {p.strip().strip("\"'").rstrip("*") for p in found.group(1).split(",") if p.strip()}
    assert shipped == set(PACKAGES), (
        f"setup.py ships {sorted(shipped)}, the layering knows {sorted(PACKAGES)}: add the new "
        "package to PACKAGES and FORBIDDEN (what it must not import) and describe it in docs/design.md §2"
    )


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("fake_worker/x.py", "from fake_sidecar.engine import Engine\n", "fake_sidecar.engine"),
        ("fake_worker/replay/x.py", "from ..client import Client\n", "fake_worker.client"),
        ("conformance/a/x.py", "def f():\n    import fake_worker.programs as p\n", "fake_worker.programs"),
        ("conformance/a/x.py", "from . import model\n", "conformance.a"),
    ],
)
def test_imports_are_resolved_to_absolute_names(tmp_path: Path, where, source, expected) -> None:
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert expected in imported(path, root=tmp_path)


def test_a_new_violation_is_reported(tmp_path: Path) -> None:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "taskhub_wire" / "kinds.py").write_text("import conformance\n")
    (tmp_path / "fake_sidecar" / "server.py").write_text("from fake_worker import programs\n")
    (tmp_path / "conformance" / "targets").mkdir()
    (tmp_path / "conformance" / "targets" / "reference.py").write_text("import fake_sidecar\n")
    (tmp_path / "conformance" / "runner.py").write_text("from fake_worker.programs import Program\n")
    problems = violations(root=tmp_path, debt={})
    assert [p.split(":")[0] for p in problems] == [
        "conformance/runner.py", "fake_sidecar/server.py", "taskhub_wire/kinds.py"
    ], problems
