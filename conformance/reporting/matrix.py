"""The target x requirement matrix: `matrix.md` and a self-contained `matrix.html`.

Rows are the catalogue's requirements grouped by area (then any requirement id a scenario names
that the catalogue lacks), columns are the pairs. A cell aggregates the scenarios covering the
requirement on that pair, each scenario with that requirement's own verdict in the run, worst first:
FAILED > ERROR > KNOWN_FAILURE > WARNING > OBSERVATION > PASSED > NOT_APPLICABLE; UNCOVERED when no
scenario covers it there. Every non-PASSED cell lists its scenarios and why, failures first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from conformance.events import Event, Outcome, ScenarioFinished
from conformance.reporting.catalogue import Catalogue
from conformance.reporting.model import Cell, Row, RunView, reason

COLUMN_ORDER = (
    Outcome.PASSED,
    Outcome.FAILED,
    Outcome.ERROR,
    Outcome.KNOWN_FAILURE,
    Outcome.WARNING,
    Outcome.OBSERVATION,
    Outcome.NOT_APPLICABLE,
    Outcome.UNCOVERED,
)
ICON = {
    Outcome.PASSED: "✅",
    Outcome.FAILED: "❌",
    Outcome.ERROR: "💥",
    Outcome.KNOWN_FAILURE: "🚧",
    Outcome.WARNING: "⚠️",
    Outcome.OBSERVATION: "🔍",
    Outcome.NOT_APPLICABLE: "➖",
    Outcome.UNCOVERED: "⬜",
}
LABEL = {
    Outcome.PASSED: "passed",
    Outcome.FAILED: "FAILED",
    Outcome.ERROR: "ERROR",
    Outcome.KNOWN_FAILURE: "known failure",
    Outcome.WARNING: "warning",
    Outcome.OBSERVATION: "observation",
    Outcome.NOT_APPLICABLE: "not applicable",
    Outcome.UNCOVERED: "uncovered",
}
MEANING = {
    Outcome.PASSED: "every scenario covering it passed",
    Outcome.FAILED: "a scenario found the target breaking this MUST",
    Outcome.ERROR: "a scenario could not run: a harness or target error",
    Outcome.KNOWN_FAILURE: "the target breaks this MUST and declares it (a known gap, with evidence)",
    Outcome.WARNING: "the target does not meet this SHOULD",
    Outcome.OBSERVATION: "differs from the reference where the contract allows it (reports/differential.md)",
    Outcome.NOT_APPLICABLE: "the target lacks a capability the scenarios need",
    Outcome.UNCOVERED: "no scenario covers it on this pair",
}
# background, text
COLOUR = {
    Outcome.PASSED: ("#dcfce7", "#166534"),
    Outcome.FAILED: ("#fecaca", "#991b1b"),
    Outcome.ERROR: ("#e9d5ff", "#6b21a8"),
    Outcome.KNOWN_FAILURE: ("#fed7aa", "#9a3412"),
    Outcome.WARNING: ("#fef3c7", "#92400e"),
    Outcome.OBSERVATION: ("#e0f2fe", "#075985"),
    Outcome.NOT_APPLICABLE: ("#e5e7eb", "#374151"),
    Outcome.UNCOVERED: ("#ffffff", "#6b7280"),
}


@dataclass(frozen=True, slots=True)
class Matrix:
    view: RunView
    rows: list[Row]
    cells: dict[tuple[str, str], Cell]

    @classmethod
    def build(cls, events: Iterable[Event], *, catalogue: Catalogue) -> Matrix:
        view = RunView.from_events(events)
        return cls(view, view.rows(catalogue), view.cells())

    @property
    def pairs(self) -> list[str]:
        return self.view.pairs

    def cell(self, requirement_id: str, pair: str) -> Cell:
        return self.view.cell(self.cells, requirement_id, pair)

    def areas(self) -> dict[str, list[Row]]:
        out: dict[str, list[Row]] = {}
        for row in self.rows:
            out.setdefault(row.area, []).append(row)
        return out

    def column_counts(self, pair: str) -> dict[Outcome, int]:
        counts = dict.fromkeys(COLUMN_ORDER, 0)
        for row in self.rows:
            counts[self.cell(row.id, pair).status] += 1
        return counts


OUTCOME_ORDER_WORST_FIRST = (Outcome.FAILED, Outcome.ERROR, Outcome.KNOWN_FAILURE, Outcome.WARNING,
                             Outcome.OBSERVATION, Outcome.PASSED, Outcome.NOT_APPLICABLE)


def _why(result: ScenarioFinished) -> str:
    """reason(), without the outcome it would repeat ("WARNING: WARNING: ...")."""
    why = reason(result)
    for prefix in (f"{result.outcome.value}: ", f"{result.outcome.value} "):
        if why.startswith(prefix):
            return why[len(prefix):]
    return why


def _result_lines(cell: Cell) -> list[tuple[str, str, str]]:
    """(scenario, outcome, why) for each result of a cell, worst outcomes first."""
    rank = {o: i for i, o in enumerate(OUTCOME_ORDER_WORST_FIRST)}
    return [(r.scenario, r.outcome.value, _why(r)) for r in sorted(cell.results, key=lambda r: rank[r.outcome])]


def _grouped(lines: list[tuple[str, str, str]]) -> list[tuple[list[str], str, str]]:
    """Results that share their outcome and reason, said once with every scenario named (a gap's reason
    is the same for each scenario it covers). By scenario id, not by when each finished: two runs of the
    same results (the CLI's and the pytest path's, whose results come in another order) read the same."""
    out: dict[tuple[str, str], list[str]] = {}
    for scenario, outcome, why in sorted(lines):
        out.setdefault((outcome, why), []).append(scenario)
    return [(scenarios, outcome, why) for (outcome, why), scenarios in out.items()]


def _count(cell: Cell) -> str:
    """How many of the covering scenarios gave the cell its status: "2 of 82 scenarios"."""
    total = len(cell.results)
    if cell.status in (Outcome.PASSED, Outcome.UNCOVERED) or not total:
        return f"{total} scenario{'s' if total != 1 else ''}" if total else ""
    worst = {r.outcome for r in cell.results if r.outcome is not Outcome.PASSED}
    bad = sum(1 for r in cell.results if r.outcome in worst and r.outcome is cell.status) or \
        sum(1 for r in cell.results if r.outcome is not Outcome.PASSED)
    return f"{bad} of {total} scenario{'s' if total != 1 else ''}"


def _run_line(view: RunView) -> str:
    parts = []
    if view.run_id:
        parts.append(f"run {view.run_id}")
    if view.started_at is not None:
        parts.append(datetime.fromtimestamp(view.started_at, UTC).strftime("%Y-%m-%d %H:%M UTC"))
    n = len(view.pairs)
    parts.append(f"{len(view.results)} scenario results on {n} pair{'s' if n != 1 else ''}")
    return " · ".join(parts)


# ------------------------------------------------------------------------------------- markdown


def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def render_matrix_md(matrix: Matrix) -> str:
    pairs = matrix.pairs
    out = ["# Conformance matrix", "", _run_line(matrix.view), ""]
    if matrix.view.command:
        out += [f"Command: `{matrix.view.command}`", ""]
    out.append("Legend: " + " · ".join(f"{ICON[s]} {LABEL[s]} ({MEANING[s]})" for s in COLUMN_ORDER))
    out.append("")
    out.append(
        "Cells aggregate the scenarios covering a requirement on a pair, worst first: "
        "FAILED > ERROR > known failure > warning > observation > passed > not applicable. "
        "Only FAILED (a MUST broken) and ERROR fail a run by default."
    )
    out.append("")
    out.append("| cells | " + " | ".join(f"`{_md(p)}`" for p in pairs) + " |")
    out.append("| --- |" + " ---: |" * len(pairs))
    for status in COLUMN_ORDER:
        out.append(f"| {ICON[status]} {LABEL[status]} | " + " | ".join(str(matrix.column_counts(p)[status]) for p in pairs) + " |")
    for area, rows in matrix.areas().items():
        out += ["", f"## {_md(area)}", ""]
        out.append("| requirement | level | title | " + " | ".join(f"`{_md(p)}`" for p in pairs) + " |")
        out.append("| --- | --- | --- |" + " --- |" * len(pairs))
        details: list[str] = []
        for row in rows:
            cells = []
            for pair in pairs:
                cell = matrix.cell(row.id, pair)
                text = f"{ICON[cell.status]} {LABEL[cell.status]}"
                if cell.gap_passed:
                    text += " (declared gap passed)"
                if cell.status is not Outcome.PASSED and cell.results:
                    text += f" ({_count(cell)})"
                    details.append(f"- **{row.id}** on `{pair}`: {LABEL[cell.status]}, {_count(cell)}")
                    details += [f"  - {', '.join(f'`{s}`' for s in names)} {o}" + (f": {_md(why)}" if why else "")
                                for names, o, why in _grouped(_result_lines(cell))]
                elif cell.gap_passed:
                    details.append(f"- **{row.id}** on `{pair}`: declared gap passed, remove it from targets.yaml")
                cells.append(text)
            title = _md(row.title) if row.requirement else "_(not in the catalogue)_"
            out.append(f"| {row.id} | {row.level} | {title} | " + " | ".join(cells) + " |")
        if details:
            out += ["", *details]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------- html

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif; margin: 24px; color: #111827; }
h1 { font-size: 22px; margin: 0 0 4px; }
.run { color: #4b5563; margin: 0 0 4px; font-size: 13px; }
.run code { font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 12px 0 16px; font-size: 12px; }
.legend span.sw { display: inline-block; min-width: 74px; text-align: center; padding: 2px 6px; border-radius: 3px;
  margin-right: 4px; font-weight: 600; }
table { border-collapse: separate; border-spacing: 0; font-size: 13px; }
th, td { border-bottom: 1px solid #e5e7eb; padding: 5px 8px; text-align: left; vertical-align: top; }
thead th { position: sticky; top: 0; background: #f9fafb; border-bottom: 2px solid #9ca3af; z-index: 1; }
thead th.pair { text-align: center; max-width: 150px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px;
  overflow-wrap: anywhere; }
tbody th.area { background: #1f2937; color: #f9fafb; font-size: 13px; padding: 6px 8px; letter-spacing: .02em; }
td.id { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; white-space: nowrap; }
td.level { font-size: 11px; font-weight: 700; white-space: nowrap; }
td.level.MUST { color: #991b1b; } td.level.SHOULD { color: #92400e; } td.level.MAY { color: #4b5563; }
td.title { max-width: 360px; }
td.cell { text-align: center; min-width: 120px; max-width: 240px; font-weight: 600; border-left: 2px solid #ffffff; }
td.cell details { text-align: left; font-weight: 400; }
td.cell summary { cursor: pointer; font-weight: 600; text-align: center; list-style-position: inside; }
td.cell ul { margin: 4px 0 0; padding-left: 16px; font-size: 11px; }
td.cell li code { font-size: 11px; }
td.cell .why { display: block; color: #374151; word-break: break-word; }
td.UNCOVERED { background-image: repeating-linear-gradient(135deg, #ffffff 0 6px, #f3f4f6 6px 12px); font-weight: 400; font-style: italic; }
tfoot td { border-top: 2px solid #9ca3af; font-size: 11px; vertical-align: top; }
tfoot td.counts { text-align: left; }
tfoot .n { display: inline-block; min-width: 20px; text-align: right; font-weight: 700; margin-right: 4px; }
.repro { display: block; font-size: 10px; color: #374151; white-space: pre-wrap; overflow-wrap: anywhere;
  word-break: break-all; max-width: 100%; }
td.cell a { color: inherit; }
.gap { display: block; font-size: 10px; font-weight: 400; color: #92400e; }
"""


def _pair_header(pair: str) -> str:
    return escape(pair).replace("+", "+<wbr>")


def _cell_html(cell: Cell) -> str:
    status = cell.status
    bg, fg = COLOUR[status]
    lines = _result_lines(cell)
    tooltip = "\n".join(f"{s}: {o}" + (f" ({why})" if why else "") for s, o, why in lines) or MEANING[status]
    style = f' style="background-color:{bg};color:{fg}"'
    attrs = f'class="cell {status.value}"{style} title="{escape(tooltip)}" data-status="{status.value}"'
    gap = '<span class="gap">declared gap passed</span>' if cell.gap_passed else ""
    if status is Outcome.UNCOVERED or not lines:
        return f"<td {attrs}>{LABEL[status]}{gap}</td>"
    if status is Outcome.PASSED:  # the scenarios that show it, each linked to its file
        names = "".join(f"<li>{_scenario_link(r)}</li>" for r in cell.results)
        return (f"<td {attrs}><details><summary>{LABEL[status]} · {escape(_count(cell))}</summary>"
                f"<ul>{names}</ul></details>{gap}</td>")
    # What to act on first, each with the command that runs it again; the passing scenarios folded away.
    rank = {o: i for i, o in enumerate(OUTCOME_ORDER_WORST_FIRST)}
    results = sorted(cell.results, key=lambda r: rank[r.outcome])
    problems = [r for r in results if r.outcome is not Outcome.PASSED]
    passed = [r for r in results if r.outcome is Outcome.PASSED]
    items = "".join(
        f"<li>{_scenario_link(r)} {escape(r.outcome.value)}"
        + (f'<span class="why">{escape(why)}</span>' if (why := _why(r)) else "")
        + (f'<code class="repro">{escape(r.reproduce)}</code>' if r.reproduce else "") + "</li>"
        for r in problems
    )
    if passed:
        names = "".join(f"<li>{_scenario_link(r)}</li>" for r in passed)
        items += f"<li><details><summary>{len(passed)} passed</summary><ul>{names}</ul></details></li>"
    summary = f"{LABEL[status]} · {_count(cell)}"
    opened = " open" if status in (Outcome.FAILED, Outcome.ERROR) else ""  # the ones to act on
    return f"<td {attrs}><details{opened}><summary>{escape(summary)}</summary><ul>{items}</ul></details>{gap}</td>"


def _scenario_link(result: ScenarioFinished) -> str:
    """The scenario's id, linked to its YAML file when the run knew where that is."""
    name = f"<code>{escape(result.scenario)}</code>"
    if not result.source:
        return name
    return f'<a href="{escape(Path(result.source).resolve().as_uri())}">{name}</a>'


def render_matrix_html(matrix: Matrix) -> str:
    pairs = matrix.pairs
    width = 3 + len(pairs)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Conformance matrix{' · ' + escape(matrix.view.run_id) if matrix.view.run_id else ''}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Conformance matrix</h1>",
        f'<p class="run">{escape(_run_line(matrix.view))}</p>',
    ]
    if matrix.view.command:
        out.append(f'<p class="run">command: <code>{escape(matrix.view.command)}</code></p>')
    out.append('<div class="legend">')
    for status in COLUMN_ORDER:
        bg, fg = COLOUR[status]
        extra = ' class="sw UNCOVERED"' if status is Outcome.UNCOVERED else ' class="sw"'
        out.append(
            f'<div><span{extra} style="background-color:{bg};color:{fg};border:1px solid {fg}33">{LABEL[status]}</span>'
            f"{escape(MEANING[status])}</div>"
        )
    out.append("</div>")
    out.append("<table><thead><tr><th>requirement</th><th>level</th><th>title</th>")
    out += [f'<th class="pair">{_pair_header(p)}</th>' for p in pairs]
    out.append("</tr></thead>")
    for area, rows in matrix.areas().items():
        out.append(f'<tbody><tr><th class="area" colspan="{width}">{escape(area)}</th></tr>')
        for row in rows:
            req = row.requirement
            hint = f"{req.text}\n\nsource: {req.source}" if req else "not in the requirement catalogue"
            out.append(
                f'<tr id="{escape(row.id)}"><td class="id">{escape(row.id)}</td>'
                f'<td class="level {escape(row.level)}">{escape(row.level)}</td>'
                f'<td class="title" title="{escape(hint)}">{escape(row.title) or "<em>(not in the catalogue)</em>"}</td>'
            )
            out += [_cell_html(matrix.cell(row.id, p)) for p in pairs]
            out.append("</tr>")
        out.append("</tbody>")
    out.append('<tfoot><tr><td colspan="3"><strong>cells per pair</strong></td>')
    for pair in pairs:
        counts = matrix.column_counts(pair)
        lines = "<br>".join(f'<span class="n" style="color:{COLOUR[s][1]}">{n}</span>{LABEL[s]}' for s, n in counts.items() if n)
        out.append(f'<td class="counts">{lines}</td>')
    out.append("</tr></tfoot></table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_matrix(events: Iterable[Event], out_dir: Path, *, catalogue: Catalogue) -> tuple[Path, Path]:
    matrix = Matrix.build(events, catalogue=catalogue)
    out_dir.mkdir(parents=True, exist_ok=True)
    md, html = out_dir / "matrix.md", out_dir / "matrix.html"
    md.write_text(render_matrix_md(matrix), encoding="utf-8")
    html.write_text(render_matrix_html(matrix), encoding="utf-8")
    return md, html
