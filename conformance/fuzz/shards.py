"""Sharded campaigns: several processes (or CI jobs) run one campaign and share what they find.

Shards of a campaign run with the same seed, so they draw the same program pools and use the same
Hypothesis example-database keys; each draws its examples with its own random seed (`--shard I/N`),
so they search different histories. They share findings through the Hypothesis example database
(`DirectoryBasedExampleDatabase`, Hypothesis' own): every failing example a shard saves, shrunk
forms included, is replayed first by every shard that runs after it on the same directory (its
reuse phase), never searched for again. Directory databases of CI jobs merge by copying their files
into one directory (each example is a file named by its hash).

Each shard writes what it did to `<database>/shards/shard-I-of-N.json`; `merge` reads them all and
makes one report, each finding once, with the shards that made it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHARDS_DIR = "shards"


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise ValueError(f"--shard {text!r}: give I/N with 1 <= I <= N, e.g. --shard 2/4")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def seed_part(self) -> int:
        """The campaign's `shard` (0 for the first shard, so one shard draws what an unsharded run does)."""
        return self.index - 1

    def path(self, database: Path) -> Path:
        return database / SHARDS_DIR / f"shard-{self.index}-of-{self.count}.json"


def finding_record(f: Any) -> dict[str, Any]:
    """What the merged report needs of a finding (worker, engine or flow campaign)."""
    rec: dict[str, Any] = {"key": getattr(f, "key", "") or f.headline(), "headline": f.headline(),
                           "level": getattr(f, "level", ""), "requirement": getattr(f, "requirement", ""),
                           "flaky": bool(getattr(f, "flaky", False)), "at_example": getattr(f, "at_example", 0),
                           "example": getattr(f, "example", "")}
    comparison = getattr(f, "comparison", None)
    if comparison is not None:
        rec["differences"] = comparison.describe(limit=4).splitlines()
    scenario = getattr(f, "scenario", None) or getattr(f, "scenario_path", None)
    if scenario is not None:
        rec["scenario"] = str(scenario)
    return rec


def save(results: Iterable[Any], *, database: Path, shard: Shard, command: str) -> Path:
    """Write this shard's campaigns (label, examples, seconds, notes, findings) next to the database."""
    path = shard.path(database)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"shard": shard.index, "of": shard.count, "command": command,
           "campaigns": [{"label": r.label, "examples": r.examples, "seconds": round(r.seconds, 1),
                          "notes": list(r.notes), "error": r.error,
                          "findings": [finding_record(f) for f in r.findings]} for r in results]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


@dataclass(frozen=True)
class Merged:
    text: str
    findings: int
    errors: int
    shards: int


def merge(database: Path) -> Merged:
    """One report from every shard file under `database` (a directory database, or its copy)."""
    folder = database / SHARDS_DIR
    files = sorted(folder.glob("shard-*-of-*.json")) if folder.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{folder}: no shard reports (shard-I-of-N.json); run `conformance fuzz --shard I/N "
                                f"--database {database}` first, or copy each CI job's database directory here")
    campaigns: dict[str, dict[str, Any]] = {}
    counts = set()
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            shard, count = int(doc["shard"]), int(doc["of"])
            runs = list(doc["campaigns"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a shard report ({type(exc).__name__}: {exc}); delete it or run the shard "
                             "again") from None
        counts.add(count)
        for run in runs:
            c = campaigns.setdefault(run["label"], {"examples": 0, "shards": [], "findings": {}, "errors": []})
            c["examples"] += int(run.get("examples", 0))
            c["shards"].append((shard, float(run.get("seconds", 0.0))))
            if run.get("error"):
                c["errors"].append(f"shard {shard}: {run['error']}")
            for f in run.get("findings", []):
                entry = c["findings"].setdefault(f["key"], {**f, "by": []})
                entry["by"].append((shard, int(f.get("at_example", 0))))
    lines = [f"conformance fuzz: merged report of {len(files)} shard(s)"
             + (f" (of {', '.join(map(str, sorted(counts)))})" if counts else "")]
    total = errors = 0
    for label, c in sorted(campaigns.items()):
        shards = ", ".join(f"{i} ({s:.0f}s)" for i, s in sorted(c["shards"]))
        lines += ["", f"{label}: {c['examples']} examples over shards {shards}, {len(c['findings'])} finding(s)"]
        for e in c["errors"]:
            errors += 1
            lines.append(f"  ERROR: {e}")
        for i, f in enumerate(sorted(c["findings"].values(), key=lambda f: f["key"]), 1):
            total += 1
            level = f" [{f['level']}{' ' + f['requirement'] if f.get('requirement') else ''}]" if f.get("level") else ""
            by = "; ".join(f"shard {s} at its example {n}" for s, n in sorted(f["by"]))
            lines.append(f"  {i}. {f['headline']}{level}" + (" (flaky)" if f.get("flaky") else "") + f" — {by}")
            if f.get("example"):
                lines.append(f"     example: {f['example']}")
            for d in f.get("differences", []):
                lines.append(f"     {d}")
            if f.get("scenario"):
                lines.append(f"     scenario: {f['scenario']}")
    lines += ["", f"{total} finding(s) in all." if total else "No finding."]
    return Merged("\n".join(lines), total, errors, len(files))


__all__ = ["Merged", "Shard", "finding_record", "merge", "save"]
