"""The packages' dependency direction (docs/design.md §2), checked on every module's imports.

`taskhub_wire` is the bottom; `taskhub_core` (the protocol's pure rules) sits on it alone;
`taskhub_programs` (the program language) imports none of the others; `fake_sidecar` and
`fake_worker` sit on them and never import each other; `conformance` is on top and reaches the
reference implementations only through `conformance/targets/reference.py`.
Inside `conformance`, the runner never imports the fuzzer, the worker dialects and comparison
profiles (`conformance/dialects/`) import neither; the fuzzer's modules, and those of every package
below `conformance`, import each other without a cycle (one seen only by the type checker included). Imports are read with `ast` (function-level and relative ones included), so
nothing is imported to check them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("taskhub_wire", "taskhub_core", "taskhub_programs", "fake_sidecar", "fake_worker", "conformance")
FAKES = ("fake_sidecar", "fake_worker")

# package -> the packages of this project it must not import
FORBIDDEN = {
    "taskhub_wire": frozenset({"taskhub_core", "taskhub_programs", "fake_sidecar", "fake_worker", "conformance"}),
    # The protocol's pure rules, below both fakes: only taskhub_wire.
    "taskhub_core": frozenset({"fake_sidecar", "fake_worker", "conformance", "taskhub_programs"}),
    # The program language: nothing of the project (the Python drivers load it beside their SDK's
    # protobuf modules).
    "taskhub_programs": frozenset({"taskhub_wire", "taskhub_core", "fake_sidecar", "fake_worker", "conformance"}),
    "fake_sidecar": frozenset({"taskhub_programs", "fake_worker", "conformance"}),
    "fake_worker": frozenset({"fake_sidecar", "conformance"}),
}

# The one module of `conformance` meant to import the reference engine and worker.
CONFORMANCE_GATEWAY = "conformance/targets/reference.py"

# Modules of `conformance` allowed to import fake_* outside the gateway, with the fake_* packages
# each one reaches: none since issue 10 (the engine's pure rules are taskhub_core's, the program
# language taskhub_programs', the dialects and comparison profiles live in conformance/dialects/, and
# the fuzzer, the replay session and the loader's adversary check take the reference engine, executor
# and rule parser from the gateway). Keep it empty; the tests below still check any entry added.
CONFORMANCE_DEBT: dict[str, frozenset[str]] = {}

# Inside `conformance`: a folder -> the subpackages its modules must not import. The runner sits
# below the fuzzer; the dialects and comparison profiles sit below both.
CONFORMANCE_INTERNAL = {
    "conformance/runner/": ("conformance.fuzz",),
    "conformance/dialects/": ("conformance.fuzz", "conformance.runner"),
}
# Folders whose modules import each other without a cycle (function-level imports and those under
# `if TYPE_CHECKING:` included: a cycle that only the type checker follows is still two modules that
# cannot be understood, or moved, one without the other). The engine's operations are classes over
# its state for this reason (fake_sidecar/engine/core.py).
ACYCLIC = ("conformance", "fake_sidecar", "fake_worker", "taskhub_core", "taskhub_wire", "taskhub_programs")


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


def internal_violations(*, root: Path) -> list[str]:
    problems = []
    for path in modules(root):
        name = path.relative_to(root).as_posix()
        banned = next((b for folder, b in CONFORMANCE_INTERNAL.items() if name.startswith(folder)), ())
        for module, line in sorted(imported(path, root=root).items()):
            hit = next((b for b in banned if module == b or module.startswith(b + ".")), None)
            if hit:
                problems.append(f"{name}:{line}: {name.rsplit('/', 1)[0]}/ must not import {hit} (imports {module})")
    return problems


def module_graph(*, root: Path, folder: str) -> dict[str, set[str]]:
    """Module -> the modules of `folder` it imports (`from pkg import mod` counts as importing mod)."""
    paths = sorted((root / folder).rglob("*.py"))
    names = {".".join(p.relative_to(root).with_suffix("").parts): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = list(path.relative_to(root).parent.parts)
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])
                                ) if node.level else (node.module or "")
                edges |= {f"{base}.{a.name}" for a in node.names} | {base}
        graph[name] = {e for e in edges if e in names and e != name and not e.endswith("__init__")
                       and names[e].name != "__init__.py"}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a cycle (strongly connected, more than one
    module), each sorted; found with Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for start in sorted(graph):
        if start not in index:
            visit(start)
    return sorted(groups)


def test_imports_follow_the_dependency_direction() -> None:
    problems = violations(root=ROOT, debt=CONFORMANCE_DEBT)
    assert not problems, "imports against the layering (docs/design.md §2):\n" + "\n".join(problems)


def test_inside_conformance_the_runner_and_the_dialects_stay_below_the_fuzzer() -> None:
    problems = internal_violations(root=ROOT)
    assert not problems, "imports against the layering inside conformance (docs/design.md §2):\n" + "\n".join(problems)


@pytest.mark.parametrize("folder", ACYCLIC)
def test_modules_import_each_other_without_a_cycle(folder: str) -> None:
    cycles = import_cycles(module_graph(root=ROOT, folder=folder))
    assert not cycles, f"import cycles in {folder}/ (move the shared piece into a module both import):\n" + \
        "\n".join(" <-> ".join(c) for c in cycles)


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


def test_a_new_violation_inside_conformance_is_reported(tmp_path: Path) -> None:
    for folder in ("runner", "dialects", "fuzz"):
        (tmp_path / "conformance" / folder).mkdir(parents=True)
        (tmp_path / "conformance" / folder / "__init__.py").write_text("")
    (tmp_path / "conformance" / "runner" / "execute.py").write_text("def f():\n    from ..fuzz import compare\n")
    (tmp_path / "conformance" / "dialects" / "vectors.py").write_text("from conformance.runner import execute\n")
    (tmp_path / "conformance" / "fuzz" / "cli.py").write_text("def f():\n    from conformance.fuzz import flows\n")
    (tmp_path / "conformance" / "fuzz" / "flows.py").write_text("from .cli import run\n")
    (tmp_path / "conformance" / "fuzz" / "common.py").write_text("from conformance.fuzz import __init__\n")
    problems = internal_violations(root=tmp_path)
    assert [p.split(":")[0] for p in problems] == ["conformance/dialects/vectors.py", "conformance/runner/execute.py"]
    assert import_cycles(module_graph(root=tmp_path, folder="conformance/fuzz")) == [
        ["conformance.fuzz.cli", "conformance.fuzz.flows"]]


def test_a_cycle_only_the_type_checker_follows_is_reported(tmp_path: Path) -> None:
    """The shape fake_sidecar/engine had before issue 23: operations importing the engine's class
    under TYPE_CHECKING while it imports them."""
    engine = tmp_path / "fake_sidecar" / "engine"
    engine.mkdir(parents=True)
    (engine / "__init__.py").write_text("from fake_sidecar.engine.core import Engine\n")
    (engine / "core.py").write_text("from fake_sidecar.engine import management\n")
    (engine / "management.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fake_sidecar.engine.core import Engine\n")
    (engine / "errors.py").write_text("")
    assert import_cycles(module_graph(root=tmp_path, folder="fake_sidecar")) == [
        ["fake_sidecar.engine.core", "fake_sidecar.engine.management"]]
