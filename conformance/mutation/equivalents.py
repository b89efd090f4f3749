"""The reviewed equivalent mutants (equivalents.yaml beside this module): mutants that no scenario can
kill because the SDK behaves the same with them, each with the reason a reviewer read in the code."""

from __future__ import annotations

from pathlib import Path

from conformance.yamlload import safe_load

FILE = Path(__file__).with_name("equivalents.yaml")


def load(sdk: str, *, path: Path = FILE) -> dict[str, str]:
    """mutant id -> reason, for one SDK."""
    doc = safe_load(path.read_text(encoding="utf-8")) or {}
    entries = doc.get(sdk) or []
    out: dict[str, str] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("mutant") or not entry.get("reason"):
            raise ValueError(f"{path}: {sdk}[{i}]: an entry is {{mutant: ID, reason: WHY}}")
        out[str(entry["mutant"])] = str(entry["reason"])
    return out
