"""The corpus's expected replay failures (`histories/explained.yaml`), each with its trace.

A history that does not replay cleanly on some SDK release is either a finding or a known, traced
defect of that release. explained.yaml lists the second kind: which histories, on which releases,
with which verdict, why (the SDK source behind it) and the upstream fix. A corpus replay then fails
only on what nobody has traced, and on an explanation that no longer happens (stale: the failure
it explains went away, so the file would hide the next one).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.errors import InputError
from conformance.replay.judge import Verdict
from conformance.versions.entries import read_entries

EXPLAINED = "explained.yaml"
_FIELDS = frozenset({"sdk", "releases", "histories", "verdict", "trace", "fixed_by"})


class ExplainedError(InputError):
    """explained.yaml that cannot be used; the message names the entry."""


@dataclass(frozen=True, kw_only=True)
class Explanation:
    sdk: str  # the SDK line replayed on
    releases: tuple[str, ...]  # the releases of that line it holds for
    histories: str  # a glob over corpus-relative history paths
    verdict: Verdict
    trace: str  # the SDK source lines behind the verdict
    fixed_by: str  # the upstream issue and commit that fixed it

    def covers(self, *, sdk: str, release: str, file: str, verdict: str) -> bool:
        return (sdk == self.sdk and release in self.releases and verdict == self.verdict.name
                and fnmatch.fnmatch(file, self.histories))

    def applies(self, *, sdk: str, release: str, file: str) -> bool:
        return sdk == self.sdk and release in self.releases and fnmatch.fnmatch(file, self.histories)


def load_explained(corpus: Path) -> tuple[Explanation, ...]:
    """The corpus's explained.yaml (none: nothing is expected to fail)."""
    out = []
    for where, e in read_entries(corpus / EXPLAINED, key="explained", fields=_FIELDS, error=ExplainedError):
        if not all(isinstance(e[k], str) and e[k].strip() for k in ("sdk", "histories", "trace", "fixed_by")):
            raise ExplainedError(f"{where}: sdk, histories, trace and fixed_by must be non-empty text")
        if not isinstance(e["verdict"], str) or e["verdict"] not in Verdict.__members__ \
                or e["verdict"] == Verdict.CLEAN.name:
            raise ExplainedError(f"{where}: verdict {e['verdict']!r} is not one of "
                                 + ", ".join(v.name for v in Verdict if not v.ok))
        releases = e["releases"]
        if not isinstance(releases, list) or not releases or not all(isinstance(r, str) for r in releases):
            raise ExplainedError(f"{where}: releases must be a list of release names")
        out.append(Explanation(sdk=e["sdk"], releases=tuple(releases), histories=e["histories"],
                               verdict=Verdict[e["verdict"]], trace=e["trace"].strip(),
                               fixed_by=e["fixed_by"].strip()))
    return tuple(out)


def explanation_for(explanations: Sequence[Explanation], *, sdk: str, release: str, file: str,
                    verdict: str) -> Explanation | None:
    return next((e for e in explanations if e.covers(sdk=sdk, release=release, file=file, verdict=verdict)), None)
