"""One home for kinds: no module but `taskhub_wire/kinds.py` tables event or action kinds by name.

A table here is a set, tuple, list or dict literal holding two or more kind names in either
spelling (``"TaskScheduled"``, ``"taskScheduled"``). Such a literal is how a second vocabulary
starts (seven of them disagreed on whether ExecutionCompleted is made by an action); name kinds
through `EventKind` / `ActionKind` and the sets derived in `taskhub_wire.kinds` instead.
Read with `ast`, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from taskhub_wire import pb

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("taskhub_wire", "taskhub_core", "taskhub_programs", "fake_sidecar", "fake_worker", "conformance")
HOME = ROOT / "taskhub_wire" / "kinds.py"


def kind_names() -> frozenset[str]:
    names: set[str] = set()
    for message, oneof in ((pb.HistoryEvent, "eventType"), (pb.WorkflowAction, "workflowActionType")):
        for f in message.DESCRIPTOR.oneofs_by_name[oneof].fields:
            names |= {f.name, f.name[:1].upper() + f.name[1:]}
    return frozenset(names)


def tables(source: str, names: frozenset[str]) -> list[tuple[int, list[str]]]:
    """(line, kind names) of each collection literal holding two or more kind names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None] + node.values
        else:
            continue
        named = [e.value for e in items if isinstance(e, ast.Constant) and e.value in names]
        if len(named) >= 2:
            found.append((node.lineno, named))
    return found


def test_no_second_kind_table() -> None:
    names = kind_names()
    offenders = [f"{path.relative_to(ROOT)}:{line}: {named}"
                 for pkg in PACKAGES for path in sorted((ROOT / pkg).rglob("*.py")) if path != HOME
                 for line, named in tables(path.read_text(encoding="utf-8"), names)]
    assert not offenders, ("kinds tabled outside taskhub_wire/kinds.py; use EventKind/ActionKind:\n"
                           + "\n".join(offenders))


def test_the_scan_finds_a_table() -> None:
    names = kind_names()
    src = 'X = {"TaskScheduled": "task", "timerCreated": 1}\nY = ("taskCompleted",)\nZ = "EventRaised" == k\n'
    assert tables(src, names) == [(1, ["TaskScheduled", "timerCreated"])]
