"""reports/engine-differential.md and .json: every difference with both sides, scenario and fate."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conformance.enginediff.compare import Difference
from conformance.enginediff.fates import Explanation, Fate, fate_of


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    text = text if len(text) <= limit else text[:limit] + "…"
    return text.replace("|", "\\|")


def write(*, out_dir: Path, diffs: Sequence[Difference], table: Sequence[Explanation],
          runs: Mapping[str, Mapping[str, str]], command: str) -> dict[str, Path]:
    """`runs`: engine -> scenario -> outcome (the reference engine's too)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for d in diffs:
        e = fate_of(d, table)
        rows.append({**d.as_dict(), "shape": d.shape, "fate": (e.fate if e else Fate.UNEXPLAINED).value,
                     "cite": e.cite if e else "", "why": e.why if e else ""})
    engines = [e for e in runs if e != "reference"]
    compared = {e: sorted(set(runs[e]) & set(runs.get("reference", {}))) for e in engines}
    counts = {e: dict(Counter(r["fate"] for r in rows if r["engine"] == e)) for e in engines}
    doc = {"command": command, "engines": engines, "scenarios_compared": {e: len(v) for e, v in compared.items()},
           "scenarios_differing": {e: len({r["scenario"] for r in rows if r["engine"] == e}) for e in engines},
           "differences": len(rows), "by_fate": counts, "outcomes": runs, "rows": rows}
    paths = {"json": out_dir / "engine-differential.json", "md": out_dir / "engine-differential.md"}
    paths["json"].write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = ["# Engine differential", "",
             "The flow scenarios with the reference worker on the reference engine and on each real engine; "
             "what the contract leaves free is normalised away (instance ids, absolute times as relations, "
             "execution ids, tokens; `conformance/enginediff/normalise.py`). Each difference has a fate "
             "(`conformance/enginediff/fates.yaml`).", "", f"Command: `{command}`", ""]
    for e in engines:
        lines.append(f"- **{e}**: {len(compared[e])} scenarios compared, "
                     f"{doc['scenarios_differing'][e]} with differences, "
                     f"{sum(counts[e].values())} differences ("
                     + ", ".join(f"{k} {v}" for k, v in sorted(counts[e].items())) + ")")
    lines.append("")
    by_kind: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault((r["engine"], r["fate"], r["aspect"], r["shape"]), []).append(r)
    for (engine, fate, aspect, shape), group in sorted(by_kind.items()):
        first = group[0]
        lines += [f"## {engine}: {aspect} {shape or '(whole)'} — {fate}" + (f" ({first['cite']})" if first["cite"] else ""),
                  ""]
        if first["why"]:
            lines += [first["why"], ""]
        lines += ["| scenario | instance | where | reference | " + engine + " |", "|---|---|---|---|---|"]
        for r in group[:12]:
            lines.append(f"| {r['scenario']} | {r['instance']} | `{r['path']}` | `{_short(r['reference'], 160)}` | "
                         f"`{_short(r['other'], 160)}` |".replace("\n", " "))
        if len(group) > 12:
            lines.append(f"| … {len(group) - 12} more in the .json | | | | |")
        lines.append("")
    paths["md"].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths
