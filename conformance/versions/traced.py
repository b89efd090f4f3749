"""The version matrix's traced failures (`traced.yaml` beside this module): FAILED scenarios of a release
whose cause is known, each with the SDK source behind it and the release that fixed it.

A FAILED scenario stays FAILED (a MUST the release breaks); the matrix report says whether it is
traced, and by which entry. An entry whose scenario PASSED on a cell of a release it names is
reported as stale (the fix reached that release, or the scenario changed), so the file does not
outlive what it explains. Pure: reading the YAML is the only I/O.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.errors import InputError
from conformance.versions.entries import read_entries

TRACED_PATH = Path(__file__).with_name("traced.yaml")
_FIELDS = frozenset({"sdk", "releases", "scenarios", "cause", "trace", "fixed_by"})


class TracedError(InputError):
    """traced.yaml that cannot be used; the message names the entry."""


@dataclass(frozen=True, kw_only=True)
class Trace:
    sdk: str  # the SDK line (releases.yaml's name)
    releases: tuple[str, ...]  # its releases the trace holds for, on every engine
    scenarios: tuple[str, ...]  # scenario ids or globs
    cause: str  # one line: what the release does
    trace: str  # the SDK source lines at that release
    fixed_by: str  # the upstream fix and the first release with it, or why there is none

    def covers(self, *, sdk: str, release: str, scenario: str) -> bool:
        return (sdk == self.sdk and release in self.releases
                and any(fnmatch.fnmatchcase(scenario, g) for g in self.scenarios))


def load_traced(path: Path = TRACED_PATH) -> tuple[Trace, ...]:
    out = []
    for where, e in read_entries(path, key="traced", fields=_FIELDS, error=TracedError):
        if not all(isinstance(e[k], str) and e[k].strip() for k in ("sdk", "cause", "trace", "fixed_by")):
            raise TracedError(f"{where}: sdk, cause, trace and fixed_by must be non-empty text")
        for k in ("releases", "scenarios"):
            if not isinstance(e[k], list) or not e[k] or not all(isinstance(x, str) and x for x in e[k]):
                raise TracedError(f"{where}: {k} must be a non-empty list of names")
        out.append(Trace(sdk=e["sdk"], releases=tuple(e["releases"]), scenarios=tuple(e["scenarios"]),
                         cause=" ".join(e["cause"].split()), trace=" ".join(e["trace"].split()),
                         fixed_by=" ".join(e["fixed_by"].split())))
    return tuple(out)


def trace_for(traces: Sequence[Trace], *, sdk: str, release: str, scenario: str) -> int | None:
    """The index of the first entry that traces this FAILED scenario, or None."""
    return next((i for i, t in enumerate(traces) if t.covers(sdk=sdk, release=release, scenario=scenario)), None)
