"""The differential report: where an SDK's answer differs from the reference worker's on the same turn.

Never a verdict. Differences from the reference are useful to SDK authors (an action id base, a
child-id format, timer names, error type names, empty vs unset strings), but the contract does not
ask an SDK to answer as dapr-ext-workflow does, so they are collected here, grouped by field and
SDK with a count and one example each, and written as `reports/differential.md` and `.json`.

Sources: the self-oracle fuzzer (every turn it checks, `conformance fuzz`), and any caller that
compares an SDK with the reference on a vector scenario (`add_difference`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPORT_NAME = "differential"
_INDEX = re.compile(r"\[\d+\]")
_PAYLOAD = re.compile(r"(\.(?:input|result|data|reason))\..*$")  # a payload's inside is one field


def field_of(path: str) -> str:
    """A difference's field, stable across examples: the path without indices or payload insides."""
    return _PAYLOAD.sub(r"\1", _INDEX.sub("[]", path)) or "(answer)"


@dataclass
class Group:
    sdk: str
    field: str
    count: int = 0
    sources: set[str] = field(default_factory=set)
    example: dict[str, Any] = field(default_factory=dict)  # the first one seen


@dataclass
class DifferentialReport:
    """Differences by (field, SDK); thread-safe, mergeable, written as Markdown and JSON."""

    groups: dict[tuple[str, str], Group] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)  # turns compared per SDK
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def compared(self, *, sdk: str, n: int = 1) -> None:
        with self._lock:
            self.turns[sdk] = self.turns.get(sdk, 0) + n

    def add(self, *, sdk: str, path: str, reference: Any, got: Any, source: str,
            example: Mapping[str, Any] | None = None) -> None:
        """One difference: `path` in the answers (e.g. `actions[0].createTimer.name`), the two values,
        where it was seen (`fuzz seed 1`, `vectors/child-first-turn`), and what reproduces it."""
        key = (field_of(path), sdk)
        with self._lock:
            g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = Group(sdk=sdk, field=key[0])
                g.example = {"path": path, "reference": _plain(reference), "sdk": _plain(got), "source": source,
                             **dict(example or {})}
            g.count += 1
            g.sources.add(source)

    def add_comparison(self, *, sdk: str, comparison: Any, source: str,
                       example: Mapping[str, Any] | None = None) -> None:
        """Every difference of a `compare.Comparison` (reference first, SDK second)."""
        for path, ref, got in comparison.diffs:
            if path.endswith(".length"):
                continue
            self.add(sdk=sdk, path=path, reference=ref, got=got, source=source, example=example)

    def merge(self, other: "DifferentialReport") -> None:
        for key, g in other.groups.items():
            with self._lock:
                mine = self.groups.get(key)
                if mine is None:
                    self.groups[key] = Group(sdk=g.sdk, field=g.field, count=g.count, sources=set(g.sources),
                                             example=dict(g.example))
                else:
                    mine.count += g.count
                    mine.sources |= g.sources
        for sdk, n in other.turns.items():
            self.compared(sdk=sdk, n=n)

    # ------------------------------------------------------------------ output

    def to_json(self) -> dict[str, Any]:
        rows = sorted(self.groups.values(), key=lambda g: (g.field, g.sdk))
        return {"kind": "differential", "verdict": "none: observations only, never a failure",
                "turns_compared": dict(sorted(self.turns.items())),
                "differences": [{"field": g.field, "sdk": g.sdk, "count": g.count, "sources": sorted(g.sources),
                                 "example": g.example} for g in rows]}

    def to_markdown(self) -> str:
        lines = ["# Differences from the reference worker", "",
                 "Observations, never verdicts: the same turn answered by an SDK and by the reference worker, "
                 "compared field by field, and the differences scenarios found where the contract leaves the "
                 "choice to the worker (docs/verdicts.md). The contract does not ask an "
                 "SDK to answer as the reference does; contract violations are in the fuzz and run reports.", ""]
        if self.turns:
            lines.append("Turns compared: " + ", ".join(f"{k} {v}" for k, v in sorted(self.turns.items())) + ".")
            lines.append("")
        if not self.groups:
            lines.append("No difference.")
            return "\n".join(lines) + "\n"
        by_field: dict[str, list[Group]] = {}
        for g in self.groups.values():
            by_field.setdefault(g.field, []).append(g)
        lines += ["| field | SDK | count | example (reference → SDK) | seen in |", "|---|---|---:|---|---|"]
        for name in sorted(by_field):
            for g in sorted(by_field[name], key=lambda g: (-g.count, g.sdk)):
                ex = f"`{_short(g.example.get('reference'))}` → `{_short(g.example.get('sdk'))}`"
                lines.append(f"| `{name}` | {g.sdk} | {g.count} | {ex} | {_short(', '.join(sorted(g.sources)), 60)} |")
        lines += ["", "## One example each", ""]
        for name in sorted(by_field):
            for g in sorted(by_field[name], key=lambda g: g.sdk):
                lines.append(f"- **{name}** on {g.sdk} ({g.count}×): " + _short(json.dumps(g.example, ensure_ascii=False,
                                                                                       default=str), 600))
        return "\n".join(lines) + "\n"

    def write(self, folder: Path, *, merge_existing: bool = False) -> tuple[Path, Path]:
        """`folder/differential.md` and `.json`; with `merge_existing`, added to what is there."""
        folder.mkdir(parents=True, exist_ok=True)
        js, md = folder / f"{REPORT_NAME}.json", folder / f"{REPORT_NAME}.md"
        report = self
        if merge_existing and js.is_file():
            report = load(js)
            report.merge(self)
        js.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        md.write_text(report.to_markdown(), encoding="utf-8")
        return md, js


def load(path: Path) -> DifferentialReport:
    """A report written by `write` (a broken file is a clear error, not a traceback)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        out = DifferentialReport(turns={str(k): int(v) for k, v in (doc.get("turns_compared") or {}).items()})
        for row in doc.get("differences") or []:
            g = Group(sdk=str(row["sdk"]), field=str(row["field"]), count=int(row["count"]),
                      sources=set(row.get("sources") or []), example=dict(row.get("example") or {}))
            out.groups[(g.field, g.sdk)] = g
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a differential report ({type(exc).__name__}: {exc}); delete it or pass "
                         "another folder") from exc


_SHARED = DifferentialReport()


def add_difference(*, sdk: str, path: str, reference: Any, got: Any, source: str,
                   example: Mapping[str, Any] | None = None, report: DifferentialReport | None = None) -> None:
    """For callers outside the fuzzer (vector scenarios): record one difference from the reference
    in `report` (default: the process-wide report that `write_shared` writes)."""
    (report or _SHARED).add(sdk=sdk, path=path, reference=reference, got=got, source=source, example=example)


def shared() -> DifferentialReport:
    return _SHARED


def write_shared(folder: Path) -> tuple[Path, Path]:
    """Write the process-wide report into `folder`, merged with the report already there."""
    return _SHARED.write(folder, merge_existing=True)


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
