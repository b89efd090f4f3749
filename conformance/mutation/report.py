"""reports/mutation/<sdk>.md and .json: a campaign's score and every mutant it ran, with its diff."""

from __future__ import annotations

import json
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from conformance.mutation.campaign import STATUSES, Campaign, score

SCHEMA_VERSION = 1


def _tool() -> str:
    try:
        return f"cosmic-ray {version('cosmic-ray')}"
    except PackageNotFoundError:
        return "cosmic-ray"


def to_json(c: Campaign) -> dict[str, Any]:
    s = c.settings
    passed = sum(1 for o in c.baseline.values() if o == "PASSED")
    return {
        "schema_version": SCHEMA_VERSION,
        "sdk": s.sdk, "version": c.version, "tool": _tool(),
        "population": c.population, "sample": s.sample, "seed": s.seed, "mutant_ids": list(s.mutants),
        "fraction": round(len(c.outcomes) / c.population, 4) if c.population else None,
        "scenario_globs": list(s.scenario), "baseline_scenarios": len(c.baseline), "baseline_passed": passed,
        "max_scenarios": s.max_scenarios, "timeout_s": s.timeout_s, "jobs": s.jobs,
        "seconds": c.seconds, "line_map_seconds": c.map_seconds,
        "resumed_from": str(s.resume) if s.resume else None,
        **score(c.outcomes),
        "mutants": [{"id": o.mutant.id, **asdict(o.mutant), "status": o.status, "reaching": o.reaching,
                     "scenarios_run": list(o.scenarios_run), "killed_by": list(o.killed_by),
                     "seconds": o.seconds, "reason": o.reason, "diff": o.diff} for o in c.outcomes],
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def to_markdown(doc: dict[str, Any]) -> str:
    counts = doc["counts"]
    how = ", ".join(x for x in (f"seed {doc['seed']}" if doc["sample"] is not None else "",
                                 f"{len(doc['mutant_ids'])} by id" if doc["mutant_ids"] else "") if x)
    drawn = (f"all {doc['population']}" if doc["sample"] is None and not doc["mutant_ids"]
             else f"{len(doc['mutants'])} of {doc['population']} ({_pct(doc['fraction'])}; {how})")
    lines = [
        f"# Mutation score: {doc['sdk']} {doc['version']}", "",
        f"Mutants of the SDK's orchestration executor made by {doc['tool']} (docs/mutation.md): {drawn}.",
        f"Each ran the scenarios whose coverage reaches its statement ({doc['max_scenarios']} at most, ranked as docs/mutation.md says), "
        f"of {doc['baseline_passed']} that passed on the unmutated SDK"
        + (f" (selection {', '.join(doc['scenario_globs'])})" if doc["scenario_globs"] else "") + ".", "",
        f"**Score: {_pct(doc['score'])}** (killed + timeout over all but equivalent and incompetent); "
        f"of the mutants some scenario reaches: {_pct(doc['score_of_covered'])}.", "",
        "| " + " | ".join(STATUSES) + " | judged |", "|" + "---|" * (len(STATUSES) + 1),
        "| " + " | ".join(str(counts[s]) for s in STATUSES) + f" | {doc['judged']} |", "",
        f"Campaign time {doc['seconds']} s (line map {doc['line_map_seconds']} s), {doc['jobs']} scenarios at once"
        + (f"; resumed from {doc['resumed_from']} (its killed and timed-out mutants kept, the time is this run's)."
           if doc.get("resumed_from") else "."), "",
    ]
    for status in ("survived", "uncovered", "timeout", "equivalent", "incompetent", "killed"):
        group = [m for m in doc["mutants"] if m["status"] == status]
        if not group:
            continue
        lines += [f"## {status} ({len(group)})", ""]
        for m in group:
            lines.append(f"### `{m['id']}`")
            lines.append("")
            detail = f"{m['reaching']} scenarios reach it; {len(m['scenarios_run'])} ran in {m['seconds']:.0f} s."
            if m["killed_by"]:
                detail += " Killed by: " + "; ".join(f"`{k}`" for k in m["killed_by"][:3])
            if m["reason"]:
                detail = "Equivalent: " + m["reason"]
            lines += [detail, ""]
            if m["diff"]:
                lines += ["```diff", m["diff"].rstrip("\n"), "```", ""]
    return "\n".join(lines)


def write(c: Campaign, *, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    doc = to_json(c)
    js, md = folder / f"{c.settings.sdk}.json", folder / f"{c.settings.sdk}.md"
    js.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    md.write_text(to_markdown(doc), encoding="utf-8")
    return md, js
