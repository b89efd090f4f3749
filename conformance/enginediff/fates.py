"""What became of each kind of difference: a rule where the engines legitimately differ, a defect of
the other engine, a declared gap, or left unexplained (`fates.yaml`, one entry per kind)."""

from __future__ import annotations

import enum
import fnmatch
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from conformance.yamlload import safe_load
from conformance.enginediff.compare import Difference
from conformance.errors import InputError

FATES_FILE = Path(__file__).with_name("fates.yaml")


class Fate(enum.StrEnum):
    RULE = "rule"  # the engines legitimately differ: an R-number of docs/engine-rules.md
    DEFECT = "defect"  # the other engine breaks the contract: its source lines
    GAP = "gap"  # a declared gap of the other engine (targets.yaml)
    TIMING = "timing"  # a race the scenario leaves open: either engine may show either side
    UNEXPLAINED = "unexplained"


@dataclass(frozen=True, kw_only=True)
class Explanation:
    engine: str
    aspect: str  # an Aspect value, or "*"
    shape: str  # regex on Difference.shape
    scenario: tuple[str, ...]  # globs on the scenario id (any matches)
    other: str  # regex on the other engine's side (JSON), ".*" for any
    fate: Fate
    cite: str  # the R-number, requirement or source lines
    why: str

    def explains(self, d: Difference) -> bool:
        return (self.engine in ("*", d.engine) and self.aspect in ("*", d.aspect.value)
                and any(fnmatch.fnmatch(d.scenario, glob) for glob in self.scenario) and re.fullmatch(self.shape, d.shape) is not None
                and re.fullmatch(self.other, json.dumps(d.other, sort_keys=True)) is not None)


def load(path: Path = FATES_FILE) -> tuple[Explanation, ...]:
    try:
        doc = safe_load(path.read_text(encoding="utf-8")) or []
        return tuple(Explanation(engine=e.get("engine", "*"), aspect=e.get("aspect", "*"), shape=e.get("shape", ".*"),
                                 scenario=_globs(e.get("scenario", "*")), other=e.get("other", ".*"), fate=Fate(e["fate"]), cite=e["cite"], why=e["why"])
                     for e in doc)
    except (OSError, yaml.YAMLError, KeyError, ValueError, TypeError, AttributeError) as exc:
        raise InputError([f"{path}: {exc}; each entry needs fate ({', '.join(f.value for f in Fate)}), cite "
                          "and why"], subject="engine-difference fates") from None


def _globs(value: object) -> tuple[str, ...]:
    """`scenario:` is one glob or a list of them."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"scenario must be a glob or a list of globs, not {value!r}")


def fate_of(d: Difference, table: Sequence[Explanation]) -> Explanation | None:
    return next((e for e in table if e.explains(d)), None)
