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
from conformance.scenario.source import did_you_mean
from conformance.versions.entries import read_entries

TRACED_PATH = Path(__file__).with_name("traced.yaml")
_FIELDS = frozenset({"sdk", "releases", "scenarios", "cause", "trace", "fixed_by", "engines"})
_OPTIONAL = frozenset({"engines"})


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
    # The engines it holds on ("daprd", or "daprd@v1.18.2" for one release); empty: every engine. A trace
    # whose cause is how one engine answers what the SDK sends (or leaves out) names that engine.
    engines: tuple[str, ...] = ()

    def covers(self, *, sdk: str, release: str, scenario: str, engine: str, engine_version: str) -> bool:
        return (sdk == self.sdk and release in self.releases
                and (not self.engines or engine in self.engines or f"{engine}@{engine_version}" in self.engines)
                and any(fnmatch.fnmatchcase(scenario, g) for g in self.scenarios))


def load_traced(path: Path = TRACED_PATH) -> tuple[Trace, ...]:
    from conformance.versions.catalogue import load_releases

    known = {name: {r.version for r in releases} for name, releases in load_releases().engines.items()}
    out = []
    for where, e in read_entries(path, key="traced", fields=_FIELDS, error=TracedError, optional=_OPTIONAL):
        if not all(isinstance(e[k], str) and e[k].strip() for k in ("sdk", "cause", "trace", "fixed_by")):
            raise TracedError(f"{where}: sdk, cause, trace and fixed_by must be non-empty text")
        for k in ("releases", "scenarios"):
            if not isinstance(e[k], list) or not e[k] or not all(isinstance(x, str) and x for x in e[k]):
                raise TracedError(f"{where}: {k} must be a non-empty list of names")
        engines = e.get("engines", [])
        if not isinstance(engines, list) or not all(isinstance(x, str) and x for x in engines):
            raise TracedError(f"{where}: engines must be a list of engine names (or NAME@VERSION); "
                              f"known: {', '.join(known)}")
        for given in engines:
            name, _, version = given.partition("@")
            if name not in known:
                raise TracedError(f"{where}: engines: unknown engine {name!r}{did_you_mean(name, list(known))}; "
                                  f"known: {', '.join(known)} (conformance/versions/releases.yaml)")
            if version and version not in known[name]:
                raise TracedError(f"{where}: engines: {name} has no release {version!r} in releases.yaml; "
                                  f"known: {', '.join(sorted(known[name]))}")
        out.append(Trace(sdk=e["sdk"], releases=tuple(e["releases"]), scenarios=tuple(e["scenarios"]),
                         cause=" ".join(e["cause"].split()), trace=" ".join(e["trace"].split()),
                         fixed_by=" ".join(e["fixed_by"].split()), engines=tuple(engines)))
    return tuple(out)


def trace_for(traces: Sequence[Trace], *, sdk: str, release: str, scenario: str, engine: str,
              engine_version: str) -> int | None:
    """The index of the first entry that traces this FAILED scenario on that engine, or None."""
    return next((i for i, t in enumerate(traces) if t.covers(sdk=sdk, release=release, scenario=scenario,
                                                            engine=engine, engine_version=engine_version)), None)
