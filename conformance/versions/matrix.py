"""The version matrix's report: per SDK release x engine release the counts and every MUST broken,
and where each FAILED cell first appears or disappears along the releases (`versions.md`, `versions.json`).

Pure: results in, text out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from conformance.versions.cells import CellResult
from conformance.versions.traced import Trace, trace_for

SHOWN = ("PASSED", "FAILED", "KNOWN_FAILURE", "WARNING", "OBSERVATION", "NOT_APPLICABLE", "ERROR")
SHORT = {"PASSED": "pass", "FAILED": "FAILED", "KNOWN_FAILURE": "known", "WARNING": "warn",
         "OBSERVATION": "obs", "NOT_APPLICABLE": "n/a", "ERROR": "ERROR"}


@dataclass(frozen=True, kw_only=True)
class Change:
    """A FAILED scenario along one axis: where it appears (first release failing after one that did not)
    or disappears (first release not failing after one that did). Releases are walked oldest first."""

    axis: str  # "sdk" (SDK releases on one engine release) or "engine" (engine releases under one SDK release)
    line: str  # what stays fixed: "on daprd v1.18.2" or "with dapr-python 1.19.0"
    scenario: str
    kind: str  # "appears" | "disappears" | "always"
    at: str  # the release where it changes (for "always": every release of the line)
    requirements: tuple[str, ...]


def changes(results: Sequence[CellResult]) -> list[Change]:
    """Appearances and disappearances of FAILED scenarios along SDK releases (per engine release and
    SDK line) and along engine releases (per SDK release and engine line). Cells that did not run are
    skipped (no verdict there)."""
    out: list[Change] = []
    ran = [r for r in results if r.ran]
    # along the SDK releases: fixed engine release and SDK line; results come newest first
    lines: dict[tuple[str, str, str], list[CellResult]] = {}
    for r in ran:
        lines.setdefault(("sdk", r.sdk.sdk, r.engine.label), []).append(r)
    for r in ran:
        lines.setdefault(("engine", r.engine.engine, r.sdk.label), []).append(r)
    for (axis, _name, fixed), cells in lines.items():
        if len(cells) < 2:
            continue
        cells = list(reversed(cells))  # oldest first
        label = (lambda c: c.sdk.version) if axis == "sdk" else (lambda c: c.engine.version)
        where = f"on {fixed}" if axis == "sdk" else f"with {fixed}"
        scenarios = sorted({s for c in cells for s in c.failed})
        for s in scenarios:
            states = [s in c.failed for c in cells]
            reqs = next(c.failed[s] for c in cells if s in c.failed)
            if all(states):
                out.append(Change(axis=axis, line=where, scenario=s, kind="always",
                                  at=", ".join(label(c) for c in cells), requirements=reqs))
                continue
            for prev, cur, c in zip(states, states[1:], cells[1:]):
                if cur and not prev:
                    out.append(Change(axis=axis, line=where, scenario=s, kind="appears", at=label(c), requirements=reqs))
                elif prev and not cur:
                    out.append(Change(axis=axis, line=where, scenario=s, kind="disappears", at=label(c),
                                      requirements=reqs))
    return out


def _why(setup_error: str) -> str:
    """What stopped a cell: the step, and the first line of the tool's output that names an error."""
    lines = [ln.strip() for ln in setup_error.splitlines() if ln.strip()]
    step = lines[0].split(": ")[0] if lines else "setup"
    marks = ("error", "undefined", "cannot find", "not available", "exited")
    first = next((ln for ln in lines[1:] if any(m in ln.lower() for m in marks)), lines[1] if len(lines) > 1 else "")
    return f"{step}: {first}" if first else (lines[0] if lines else "")


def traced_in(r: CellResult, traces: Sequence[Trace]) -> dict[str, int]:
    """The cell's FAILED scenarios that traced.yaml explains -> the entry's index."""
    found = {s: trace_for(traces, sdk=r.sdk.sdk, release=r.sdk.version, scenario=s, engine=r.engine.engine,
                          engine_version=r.engine.version) for s in r.failed}
    return {s: i for s, i in found.items() if i is not None}


def needs_attention(results: Sequence[CellResult], traces: Sequence[Trace]) -> bool:
    """Whether the matrix turns a version-skew job red: a FAILED scenario traced.yaml does not trace, an ERROR, or
    a cell that could not be set up (unless releases.yaml declares the release unbuildable). A traced FAILED scenario (an SDK defect of that release, with its source and
    fix) does not, as explained.yaml does not for the corpus; a stale trace is listed, not judged, because some
    traced defects show at random (a Go release's map-ordered actions, T5)."""
    return any(set(r.failed) - set(traced_in(r, traces)) or r.errors or (not r.ran and not r.sdk.unbuildable)
               for r in results)


def stale(results: Sequence[CellResult], traces: Sequence[Trace]) -> list[tuple[int, str, str]]:
    """(entry, cell, scenario) for a traced scenario that PASSED on a cell of a release the entry names."""
    return [(i, f"{r.sdk.label} on {r.engine.label}", s) for r in results for s, o in sorted(r.outcomes.items())
            if o == "PASSED" for i, t in enumerate(traces)
            if t.covers(sdk=r.sdk.sdk, release=r.sdk.version, scenario=s, engine=r.engine.engine,
                        engine_version=r.engine.version)]


def _counts(r: CellResult, traces: Sequence[Trace] = ()) -> str:
    if not r.ran:
        return "not run"
    n = len(traced_in(r, traces))
    return " ".join(f"{r.counts[k]} {SHORT[k]}" + (f" ({n} traced)" if k == "FAILED" and n else "")
                    for k in SHOWN if r.counts.get(k))


def render_markdown(results: Sequence[CellResult], *, command: str, traces: Sequence[Trace] = ()) -> str:
    engines = list(dict.fromkeys(r.engine.label for r in results))
    sdks = list(dict.fromkeys(r.sdk.label for r in results))
    by = {(r.sdk.label, r.engine.label): r for r in results}
    out = ["# Version matrix", "", f"`{command}`", "",
           "Each cell: the scenario library's outcomes for one SDK release on one engine release "
           "(pass, FAILED: a MUST broken and not declared, known: a declared gap, warn, obs, n/a: a capability "
           "the release lacks, ERROR). Declared gaps are the worker target's of that release "
           "(conformance/versions/releases.yaml names the target).", ""]
    out.append("| SDK release | " + " | ".join(engines) + " |")
    out.append("|---|" + "---|" * len(engines))
    for s in sdks:
        row = [f"{_counts(by[s, e], traces)} ({by[s, e].wall_s:.0f} s)" if (s, e) in by else "" for e in engines]
        out.append(f"| {s} | " + " | ".join(row) + " |")
    out += ["", "## MUSTs broken (FAILED scenarios, undeclared)", ""]
    any_broken = False
    for r in results:
        if r.setup_error:
            any_broken = True
            declared = f" (declared in releases.yaml: {r.sdk.unbuildable})" if r.sdk.unbuildable else ""
            out.append(f"- **{r.sdk.label} on {r.engine.label}**: not run: {_why(r.setup_error)}{declared}")
            continue
        if not r.failed and not r.errors:
            continue
        any_broken = True
        traced = traced_in(r, traces)
        out.append(f"- **{r.sdk.label} on {r.engine.label}** ({len(r.failed)} FAILED, {len(traced)} of them traced, "
                   f"{len(r.errors)} ERROR):")
        for sc, reqs in sorted(r.failed.items()):
            why = f"traced [T{traced[sc] + 1}]" if sc in traced else "**untraced**"
            out.append(f"  - FAILED `{sc}`: {', '.join(reqs)}; {why}")
        for sc, why in sorted(r.errors.items()):
            out.append(f"  - ERROR `{sc}`: {why}")
    if not any_broken:
        out.append("None.")
    used = sorted({i for r in results for i in traced_in(r, traces).values()})
    if used:
        out += ["", "## Traces (conformance/versions/traced.yaml)", ""]
        for i in used:
            t = traces[i]
            on = f" on {', '.join(t.engines)}" if t.engines else ""
            out.append(f"- [T{i + 1}] {t.sdk} {', '.join(t.releases)}{on}: {t.cause} Trace: {t.trace} Fixed: {t.fixed_by}")
    old = stale(results, traces)
    if old:
        out += ["", "## Traced but PASSED here (stale: the fix reached the release, or the scenario changed)", ""]
        out += [f"- [T{i + 1}] `{s}` PASSED on {cell}" for i, cell, s in old]
    out += ["", "## Where each FAILED scenario appears or disappears", "",
            "Releases oldest first along one axis, the other held fixed. `always`: FAILED on every release of "
            "the line; `appears at V`: first FAILED at V after passing (or another outcome) before; "
            "`disappears at V`: FAILED before V, not at V.", ""]
    ch = [c for c in changes(results)]
    if not ch:
        out.append("No FAILED scenario, or no axis with two releases that ran.")
    for c in ch:
        what = {"always": f"FAILED on every release ({c.at})", "appears": f"appears at {c.at}",
                "disappears": f"disappears at {c.at}"}[c.kind]
        out.append(f"- `{c.scenario}` {c.line}: {what} ({', '.join(c.requirements)})")
    out.append("")
    return "\n".join(out)


def to_json(results: Sequence[CellResult], *, command: str, traces: Sequence[Trace] = ()) -> str:
    cells = [{"sdk": r.sdk.sdk, "sdkVersion": r.sdk.version, "worker": r.sdk.worker,
              "engine": r.engine.engine, "engineVersion": r.engine.version, "sidecar": r.engine.sidecar,
              "counts": r.counts, "failed": {k: list(v) for k, v in sorted(r.failed.items())},
              "traced": {s: {"cause": traces[i].cause, "trace": traces[i].trace, "fixedBy": traces[i].fixed_by}
                         for s, i in sorted(traced_in(r, traces).items())},
              "errors": r.errors, "mustBroken": list(r.broken), "knownGaps": list(r.known),
              "wallSeconds": round(r.wall_s, 1), "setupError": r.setup_error, "reports": r.reports}
             for r in results]
    ch = [{"axis": c.axis, "line": c.line, "scenario": c.scenario, "kind": c.kind, "at": c.at,
           "requirements": list(c.requirements)} for c in changes(results)]
    old = [{"cell": cell, "scenario": s, "cause": traces[i].cause} for i, cell, s in stale(results, traces)]
    return json.dumps({"command": command, "cells": cells, "changes": ch, "staleTraces": old}, indent=1) + "\n"
