"""One cell of the version matrix: an SDK release on an engine release, as data read from its run.

Pure: `read_cell` reads a finished run's events.jsonl; nothing here starts anything.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from conformance.events import Outcome, RunFinished, ScenarioFinished, from_json
from conformance.versions.catalogue import EngineRelease, SdkRelease


@dataclass(frozen=True, kw_only=True)
class CellResult:
    sdk: SdkRelease
    engine: EngineRelease
    counts: dict[str, int] = field(default_factory=dict)  # outcome value -> scenarios
    failed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # FAILED scenario -> MUSTs it breaks
    errors: dict[str, str] = field(default_factory=dict)  # ERROR scenario -> first line of why
    broken: tuple[str, ...] = ()  # every MUST a FAILED scenario breaks, sorted
    known: tuple[str, ...] = ()  # MUSTs broken as declared gaps (KNOWN_FAILURE)
    wall_s: float = 0.0
    setup_error: str = ""  # the environment or engine could not be made: no run
    reports: str = ""  # the cell's report folder
    outcomes: dict[str, str] = field(default_factory=dict)  # scenario -> outcome value

    @property
    def ran(self) -> bool:
        return not self.setup_error


def read_cell(events: Path, *, sdk: SdkRelease, engine: EngineRelease, wall_s: float) -> CellResult:
    counts: Counter[str] = Counter()
    failed: dict[str, tuple[str, ...]] = {}
    errors: dict[str, str] = {}
    known: set[str] = set()
    outcomes: dict[str, str] = {}
    for line in events.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        ev = from_json(line)
        if isinstance(ev, ScenarioFinished):
            counts[ev.outcome.value] += 1
            outcomes[ev.scenario] = ev.outcome.value
            if ev.outcome is Outcome.FAILED:
                failed[ev.scenario] = tuple(ev.broken) or tuple(ev.requirements)
            elif ev.outcome is Outcome.ERROR:
                errors[ev.scenario] = (ev.message or "").strip().splitlines()[0][:200] if ev.message else ""
            elif ev.outcome is Outcome.KNOWN_FAILURE:
                known.update(ev.broken or ev.requirements)
        elif isinstance(ev, RunFinished):
            pass
    broken = sorted({r for reqs in failed.values() for r in reqs})
    return CellResult(sdk=sdk, engine=engine, counts=dict(counts), failed=failed, errors=errors,
                      broken=tuple(broken), known=tuple(sorted(known)), wall_s=wall_s,
                      reports=str(events.parent), outcomes=outcomes)
