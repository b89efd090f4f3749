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
from enum import Enum
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Changes:
    modified: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def none(self) -> bool:
        return not (self.modified or self.added or self.removed)


class Build(Enum):
    """What a run's build step did to the checkout's environment."""

    UP_TO_DATE = "up to date"  # nothing built: no source changed (or an editable install sees the edit)
    TRANSPILED = "transpiled"  # only the edited files, one by one
    COMPILED = "compiled"  # only the edited files, into an overlay
    INCREMENTAL = "incremental"  # the SDK's own tool, which keeps a cache of its own (go build)
    FULL = "full build"


@dataclass(frozen=True, kw_only=True)
class BuildStep:
    build: Build
    tool: str  # what ran ("" when nothing did)
    files: tuple[str, ...] = ()  # TRANSPILED, COMPILED: the files
    notes: tuple[str, ...] = ()  # anything else it made (a class-data archive)

    def describe(self) -> str:
        """For the run's header: "up to date", "2 files compiled by javac", "full build (Maven)"."""
        if self.build in (Build.TRANSPILED, Build.COMPILED):
            n = len(self.files)
            text = f"{n} file{'s' if n != 1 else ''} {self.build.value} by {self.tool}"
        elif self.build is Build.UP_TO_DATE:
            text = "sources up to date, nothing built"
        else:
            text = f"{self.build.value} ({self.tool})"
        return "; ".join((text, *self.notes))


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


__all__ = ["Build", "BuildStep", "Changes", "compare", "load", "save", "snapshot"]
