"""`reports/summary.json`: the run in numbers, for CI dashboards and for diffing two runs.

Keys: run_id, command, started_at / finished_at (unix time and ISO 8601), duration_s, pairs,
counts (outcome -> n, and total), per_pair (pair -> outcome -> n), requirements (id -> pair ->
cell status, aggregated as in the matrix: FAILED > ERROR > KNOWN_FAILURE > WARNING > OBSERVATION > PASSED >
NOT_APPLICABLE, UNCOVERED when no scenario covers it), failures (FAILED and ERROR results:
scenario, pair, outcome, requirements, broken = the requirements its mismatches were charged to and
failed, message = its first line, incidents = what the engine refused, redelivered or dropped,
reproduce) and gaps_passed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conformance.events import Event
from conformance.reporting.catalogue import Catalogue
from conformance.reporting.model import RunView, first_line

SCHEMA_VERSION = 1


def build_summary(events: Iterable[Event], *, catalogue: Catalogue) -> dict[str, Any]:
    view = RunView.from_events(events)
    counts = {o.value: n for o, n in view.counts().items()}
    cells = view.cells()
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": view.run_id,
        "command": view.command,
        "started_at": view.started_at,
        "started": _iso(view.started_at),
        "finished_at": view.finished_at,
        "finished": _iso(view.finished_at),
        "duration_s": view.duration_s,
        "pairs": list(view.pairs),
        "counts": {**counts, "total": len(view.results)},
        "per_pair": {pair: {o.value: n for o, n in view.counts(pair).items()} for pair in view.pairs},
        "requirements": {
            row.id: {pair: view.cell(cells, row.id, pair).status.value for pair in view.pairs} for row in view.rows(catalogue)
        },
        "failures": [
            {
                "scenario": r.scenario,
                "pair": r.pair,
                "outcome": r.outcome.value,
                "requirements": list(r.requirements),
                "broken": list(r.broken),  # where its mismatches were charged (docs/verdicts.md)
                "message": first_line(r.message),
                "incidents": [f"{i.instance}: {i.line()}" for i in r.incidents],
                "reproduce": r.reproduce,
            }
            for r in view.problems()
        ],
        "gaps_passed": [
            {"scenario": r.scenario, "pair": r.pair, "requirements": list(r.requirements), "reason": r.gap_reason}
            for r in view.gaps_passed()
        ],
    }


def write_summary(events: Iterable[Event], path: Path, *, catalogue: Catalogue) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build_summary(events, catalogue=catalogue), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
