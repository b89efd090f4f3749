"""What changed in a checkout's sources since its environment last built them.

A per-file digest table is kept beside the build, so a loop run after an edit recompiles only the files
the edit touched (and nothing when none changed), instead of a whole tsc or Maven build, whose start-up
and full-program work dominate the loop on a loaded machine (docs/sdk-authors.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Changes:
    modified: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def none(self) -> bool:
        return not (self.modified or self.added or self.removed)


def snapshot(root: Path, *, patterns: Iterable[str]) -> dict[str, str]:
    """{path relative to root: sha256 of its bytes} of the files matching the glob patterns."""
    out: dict[str, str] = {}
    for pattern in patterns:
        for f in sorted(root.glob(pattern)):
            if f.is_file():
                out[f.relative_to(root).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def compare(old: Mapping[str, str], new: Mapping[str, str]) -> Changes:
    return Changes(modified=tuple(sorted(k for k in new if k in old and old[k] != new[k])),
                   added=tuple(sorted(k for k in new if k not in old)),
                   removed=tuple(sorted(k for k in old if k not in new)))


def load(stamp: Path) -> dict[str, str] | None:
    """The table saved by the last build, None when there is none (or it is unreadable: build all)."""
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def save(stamp: Path, table: Mapping[str, str]) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(dict(table), indent=0, sort_keys=True), encoding="utf-8")


__all__ = ["Changes", "compare", "load", "save", "snapshot"]
