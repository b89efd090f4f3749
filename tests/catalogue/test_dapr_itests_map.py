"""docs/dapr-itests.md, the case-by-case map of dapr's workflow integration suite, stays honest.

Every scenario a row names exists under scenarios/, every row has one of the four statuses, a covered
row names at least one scenario, the other rows say why, no case appears twice, and the counts table
at the top adds up to the rows of each folder's section. The checker is tested on broken pages below.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "dapr-itests.md"
SCENARIOS = ROOT / "scenarios"

STATUSES = ("covered", "not observable", "missing", "crossapp map")
COUNT_COLUMNS = ("cases",) + STATUSES
ROW = re.compile(r"^\| `(?P<case>[^`]+:\d+)` (?P<struct>\w+) \| (?P<status>[^|]+?) \| (?P<scenarios>[^|]*?) \|"
                 r" (?P<why>.*) \|$")
SCENARIO_ID = re.compile(r"`([^`]+)`")
SECTION = re.compile(r"^## (?P<folder>.+)$")


@dataclass(frozen=True)
class Row:
    line: int
    folder: str
    case: str
    status: str
    scenarios: tuple[str, ...]
    why: str


def parse(text: str) -> tuple[dict[str, dict[str, int]], list[Row], list[str]]:
    """(counts per folder from the top table, the rows of the folder sections, problems of form)."""
    counts: dict[str, dict[str, int]] = {}
    rows: list[Row] = []
    problems: list[str] = []
    folder: str | None = None
    in_counts = False
    for n, line in enumerate(text.splitlines(), 1):
        head = SECTION.match(line)
        if head:
            in_counts = head["folder"] == "Counts per folder"
            folder = None if in_counts else head["folder"]
            continue
        if not line.startswith("|") or line.startswith("|---") or line.startswith("| folder") or line.startswith(
                "| case"):
            continue
        if in_counts:
            cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
            if len(cells) != 1 + len(COUNT_COLUMNS) or not all(c.isdigit() for c in cells[1:]):
                problems.append(f"dapr-itests.md:{n}: a counts row is `| folder | {' | '.join(COUNT_COLUMNS)} |`")
                continue
            counts[cells[0]] = dict(zip(COUNT_COLUMNS, map(int, cells[1:])))
        elif folder is not None:
            m = ROW.match(line)
            if m is None:
                problems.append(f"dapr-itests.md:{n}: a case row is "
                                f"`| `path:line` struct | status | `scenario` ... | why |`: {line[:80]}")
                continue
            rows.append(Row(line=n, folder=folder, case=m["case"], status=m["status"],
                            scenarios=tuple(SCENARIO_ID.findall(m["scenarios"])), why=m["why"].strip()))
    return counts, rows, problems


def problems_of(text: str, *, scenarios: Path = SCENARIOS) -> list[str]:
    counts, rows, out = parse(text)
    if not rows:
        return out + ["dapr-itests.md: no case rows found"]
    seen: dict[str, int] = {}
    per_folder: dict[str, Counter[str]] = {}
    for row in rows:
        where = f"dapr-itests.md:{row.line} ({row.case})"
        if row.case in seen:
            out.append(f"{where}: the case is listed twice (first at line {seen[row.case]})")
        seen.setdefault(row.case, row.line)
        if row.status not in STATUSES:
            out.append(f"{where}: status {row.status!r} is not one of {', '.join(STATUSES)}")
        if row.status == "covered" and not row.scenarios:
            out.append(f"{where}: a covered case names the scenario(s) that check it")
        if row.status != "covered" and not row.why:
            out.append(f"{where}: a case that is not covered says why")
        for sid in row.scenarios:
            if not (scenarios / f"{sid}.yaml").is_file():
                out.append(f"{where}: scenario {sid!r} does not exist (scenarios/{sid}.yaml)")
        tally = per_folder.setdefault(row.folder, Counter())
        tally["cases"] += 1
        tally[row.status] += 1
    for folder, tally in per_folder.items():
        stated = counts.get(folder)
        actual = {c: tally[c] for c in COUNT_COLUMNS}
        if stated is None:
            out.append(f"dapr-itests.md: folder {folder!r} has rows but no line in the counts table")
        elif stated != actual:
            out.append(f"dapr-itests.md: the counts of {folder!r} say {stated}, its rows give {actual}")
    total = counts.get("total")
    if total is None:
        out.append("dapr-itests.md: the counts table has no total line")
    else:
        actual_total = {c: sum(t[c] for t in per_folder.values()) for c in COUNT_COLUMNS}
        if total != actual_total:
            out.append(f"dapr-itests.md: the total says {total}, the rows give {actual_total}")
    for folder in set(counts) - set(per_folder) - {"total"}:
        out.append(f"dapr-itests.md: the counts table lists {folder!r}, which has no section of rows")
    return out


def test_the_map_is_consistent() -> None:
    problems = problems_of(MAP.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_the_map_has_every_status_and_the_v1_18_2_cases() -> None:
    counts, rows, _ = parse(MAP.read_text(encoding="utf-8"))
    # dapr v1.18.2 registers 414 cases under tests/integration/suite/daprd/workflow/; master-only folders add more.
    tagged = [r for r in rows if not r.folder.endswith("(master only)")]
    assert len(tagged) == 414
    assert {r.status for r in rows} >= {"covered", "not observable", "crossapp map"}


GOOD = """# map
## Counts per folder
| folder | cases | covered | not observable | missing | crossapp map |
|---|---:|---:|---:|---:|---:|
| dedup | 2 | 1 | 1 | 0 | 0 |
| **total** | **2** | **1** | **1** | **0** | **0** |
## dedup
| case | status | scenarios | what it checks / why |
|---|---|---|---|
| `dedup/a.go:30` a | covered | `x/y` | checks a |
| `dedup/b.go:31` b | not observable |  | scheduler keys |
"""


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "y.yaml").write_text("title: t\n", encoding="utf-8")
    return tmp_path


def test_a_good_page_passes(tmp_path: Path) -> None:
    assert problems_of(GOOD, scenarios=_tree(tmp_path)) == []


@pytest.mark.parametrize(("change", "message"), [
    (("`x/y`", "`x/z`"), "scenario 'x/z' does not exist"),
    (("| covered | `x/y` |", "| covered |  |"), "names the scenario(s)"),
    (("| not observable |  | scheduler keys |", "| not observable |  |  |"), "says why"),
    (("| not observable |", "| unknowable |"), "is not one of"),
    (("| dedup | 2 | 1 | 1 |", "| dedup | 2 | 2 | 0 |"), "the counts of 'dedup' say"),
    (("`dedup/b.go:31` b", "`dedup/a.go:30` b"), "listed twice"),
])
def test_a_broken_page_is_named(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD
    problems = problems_of(text, scenarios=_tree(tmp_path))
    assert any(message in p for p in problems), problems
