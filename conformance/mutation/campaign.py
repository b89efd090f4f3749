"""A mutation campaign on one SDK: its mutants (sampled), the line map, each mutant's run, the report."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.mutation import environment, equivalents, linemap
from conformance.mutation.mutants import Mutant, diff_text, enumerate_mutants, mutated_source, sample
from conformance.mutation.run_mutant import mutated, run_scenarios
from conformance.mutation.sdks import SDKS, scopes

# incompetent: the mutated file is not valid Python (cosmic-ray turns `*` in a signature into `//`);
# like an equivalent it is left out of the score, since a crash on import tells nothing about the scenarios.
NEAR = 4  # lines either side of a mutant whose coverage ranks the scenarios reaching it

STATUSES = ("killed", "timeout", "survived", "uncovered", "equivalent", "incompetent")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    sdk: str
    sample: int | None = None  # mutants drawn from the population (None: all)
    seed: int = 0
    mutants: tuple[str, ...] = ()  # these mutant ids only (instead of a sample)
    scenario: tuple[str, ...] = ()  # the line map's scenario globs (default: the library)
    jobs: int = 2
    chunk: int = 4  # scenarios per `conformance run` of a mutant; the next chunk runs only if none failed
    max_scenarios: int = 24  # of those reaching a mutant, the fastest this many run
    timeout_s: float = 60.0  # per mutant: this plus 3x the baseline time of the scenarios it runs
    work: Path = Path(".mutation")
    rebuild_map: bool = False
    resume: Path | None = None  # a previous report (.json): its killed, timeout and equivalent mutants are kept


@dataclass(frozen=True, slots=True, kw_only=True)
class MutantOutcome:
    mutant: Mutant
    status: str  # one of STATUSES
    diff: str
    reaching: int  # baseline-PASSED scenarios whose coverage holds the mutated statement
    scenarios_run: tuple[str, ...] = ()
    killed_by: tuple[str, ...] = ()
    seconds: float = 0.0
    reason: str = ""  # an equivalent's reviewed reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Campaign:
    settings: Settings
    version: str
    population: int
    baseline: dict[str, str]  # scenario -> outcome on the unmutated SDK
    outcomes: tuple[MutantOutcome, ...]
    seconds: float
    map_seconds: float


def _map(settings: Settings, env: environment.Environment, scoped, *, root: Path,
         say: Callable[[str], None]) -> tuple[dict[str, linemap.Baseline], float, frozenset[str]]:
    folder = settings.work / settings.sdk
    path = folder / "linemap.json"
    meta = {"sdk": settings.sdk, "stamp": environment.stamp(venv=env.installed, scopes=scoped),
            "scenarios_selected": list(settings.scenario)}
    baselines: dict[str, linemap.Baseline] = {}
    seconds = 0
    if path.exists() and not settings.rebuild_map:
        have, kept = linemap.load(path)
        if {k: have.get(k) for k in meta} == meta:
            baselines, seconds = kept, int(have.get("seconds", 0))
            say(f"line map: {path}, {len(kept)} scenarios (--rebuild-map to make it again); mapping any added since ...")
    if not baselines:
        say("line map: running the selected scenarios once on the unmutated copy under coverage ...")
    began = time.monotonic()
    added = linemap.build(env, scopes=scoped, globs=settings.scenario, jobs=settings.jobs, folder=folder,
                          known=frozenset(baselines))
    if added or not path.exists() or settings.rebuild_map:
        say(f"line map: {len(added)} scenarios mapped: {', '.join(sorted(added)[:5])}{' ...' if len(added) > 5 else ''}")
        baselines = {**baselines, **added}
        seconds += round(time.monotonic() - began)
        linemap.save(baselines, path, meta={**meta, "seconds": seconds})
    return baselines, seconds, frozenset(added) if len(added) < len(baselines) else frozenset()


def _resumed(path: Path, *, sdk: str, by_id: dict[str, Mutant]) -> dict[str, MutantOutcome | None]:
    """A previous report's mutants: the outcome of each one detected (killed, timeout), None for the
    others, which run again (new scenarios can only add kills: the baseline is per scenario)."""
    import json

    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("sdk") != sdk:
        raise ValueError(f"{path} is a report of {doc.get('sdk')!r}, not {sdk!r}")
    out: dict[str, MutantOutcome | None] = {}
    for m in doc["mutants"]:
        if m["id"] not in by_id:
            raise ValueError(f"{path}: mutant {m['id']} is not in the installed release")
        out[m["id"]] = MutantOutcome(mutant=by_id[m["id"]], status=m["status"], diff=m["diff"], reaching=m["reaching"],
                                     scenarios_run=tuple(m["scenarios_run"]), killed_by=tuple(m["killed_by"]),
                                     seconds=m["seconds"]) if m["status"] in ("killed", "timeout") else None
    return out


def _compiles(text: str, name: str) -> bool:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `x is not "literal"` warns; the mutant is still valid Python
            compile(text, name, "exec")
    except SyntaxError:
        return False
    return True


def reaching(mutant: Mutant, *, baselines: dict[str, linemap.Baseline], stmt: dict[int, int],
             first: frozenset[str] = frozenset()) -> list[str]:
    """Baseline-PASSED scenarios that executed the mutated statement: those in `first` (scenarios added
    to the line map by this run, written for survivors), then those that ran more of the lines around
    it (a loop's body, an `if`'s branch: where the mutant's effect shows), then the fastest."""
    lines = {stmt.get(line, line) for line in range(mutant.line, mutant.end_line + 1)} | {mutant.line}
    near = range(mutant.line - NEAR, mutant.end_line + NEAR + 1)
    hit = [sid for sid, b in baselines.items()
           if b.outcome == "PASSED" and lines & b.lines.get(mutant.relpath, frozenset())]

    def around(sid: str) -> int:
        ran = baselines[sid].lines.get(mutant.relpath, frozenset())
        return sum(1 for line in near if line in ran)

    return sorted(hit, key=lambda sid: (sid not in first, -around(sid), baselines[sid].duration_s, sid))


def run(settings: Settings, *, root: Path, say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
        progress: Callable[[Campaign], None] = lambda c: None) -> Campaign:
    """The campaign; `progress` gets the campaign so far after each mutant (the CLI writes the report
    each time, so a campaign stopped midway still leaves the score of what it ran)."""
    from conformance.mutation.linemap import statement_lines, worker_command
    from conformance.targets.registry import DEFAULT_TARGETS, load_targets

    began = time.monotonic()
    spec = SDKS[settings.sdk]
    target = load_targets(DEFAULT_TARGETS).workers[spec.name]
    scoped = scopes(spec, venv=root / ".sdk" / spec.venv)
    env = environment.prepare(spec, root=root, work=settings.work, scopes=scoped)
    population = enumerate_mutants(site=env.site, scopes=scoped)
    by_id = {m.id: m for m in population}
    reviewed = equivalents.load(spec.name)
    stale = sorted(set(reviewed) - set(by_id))
    if stale:
        raise ValueError(f"{equivalents.FILE}: {spec.name}: no such mutant in the installed release: {', '.join(stale)}")
    if settings.mutants:
        unknown = [m for m in settings.mutants if m not in by_id]
        if unknown:
            raise ValueError(f"no mutant {', '.join(unknown)}; ids are FILE:LINE:OPERATOR#OCCURRENCE "
                             f"(reports/mutation/{spec.name}.json lists them)")
    # A sample, the named mutants, or both (CI's sample adds a mutant known to be killable).
    chosen = sample(population, size=settings.sample, seed=settings.seed) \
        if settings.sample is not None or not settings.mutants else []
    chosen += [by_id[m] for m in dict.fromkeys(settings.mutants) if by_id[m] not in chosen]
    kept = _resumed(settings.resume, sdk=spec.name, by_id=by_id) if settings.resume else {}
    if settings.resume:
        chosen = [by_id[i] for i in kept]  # the previous campaign's mutants, in its order
    say(f"{spec.name} {target.version}: {len(population)} mutants in the executor, {len(chosen)} to run"
        + (f" ({sum(1 for o in kept.values() if o is not None)} kept from {settings.resume})" if kept else ""))
    baselines, map_seconds, added = _map(settings, env, scoped, root=root, say=say)
    command = worker_command(env, command=target.command)
    stmt_cache: dict[str, dict[int, int]] = {}
    outcomes: list[MutantOutcome] = []
    for n, mutant in enumerate(chosen, 1):
        original, text = mutated_source(mutant, site=env.site)
        diff = diff_text(original, text, relpath=mutant.relpath) if text is not None else ""
        if mutant.relpath not in stmt_cache:
            stmt_cache[mutant.relpath] = statement_lines(original)
        hit = reaching(mutant, baselines=baselines, stmt=stmt_cache[mutant.relpath], first=added)
        if kept.get(mutant.id) is not None:
            outcome = kept[mutant.id]
        elif mutant.id in reviewed:
            outcome = MutantOutcome(mutant=mutant, status="equivalent", diff=diff, reaching=len(hit),
                                    reason=reviewed[mutant.id])
        elif text is not None and not _compiles(text, mutant.relpath):
            outcome = MutantOutcome(mutant=mutant, status="incompetent", diff=diff, reaching=len(hit))
        elif not hit or text is None:
            outcome = MutantOutcome(mutant=mutant, status="uncovered", diff=diff, reaching=0)
        else:
            picked = hit[:settings.max_scenarios]
            timeout = settings.timeout_s + 3 * sum(baselines[s].duration_s for s in picked)
            with mutated(env.site / mutant.relpath, text):
                got = run_scenarios(worker=spec.name, command=command, scenarios=picked, jobs=settings.jobs,
                                    timeout_s=timeout, chunk=settings.chunk)
            outcome = MutantOutcome(mutant=mutant, status=got.status, diff=diff, reaching=len(hit),
                                    scenarios_run=got.scenarios_run, killed_by=got.killed_by, seconds=got.seconds)
        outcomes.append(outcome)
        progress(Campaign(settings=settings, version=target.version, population=len(population),
                          baseline={sid: b.outcome for sid, b in sorted(baselines.items())},
                          outcomes=tuple(outcomes), seconds=round(time.monotonic() - began), map_seconds=map_seconds))
        say(f"[{n}/{len(chosen)}] {outcome.status:<10} {mutant.id} ({outcome.reaching} scenarios reach it, "
            f"{len(outcome.scenarios_run)} run, {outcome.seconds:.0f} s)")
    return Campaign(settings=settings, version=target.version, population=len(population),
                    baseline={sid: b.outcome for sid, b in sorted(baselines.items())}, outcomes=tuple(outcomes),
                    seconds=round(time.monotonic() - began), map_seconds=map_seconds)


def score(outcomes: Sequence[MutantOutcome]) -> dict[str, object]:
    """Killed and timed-out mutants over all but the equivalent and incompetent ones (uncovered ones count
    as survivors)."""
    counts = {s: sum(1 for o in outcomes if o.status == s) for s in STATUSES}
    judged = len(outcomes) - counts["equivalent"] - counts["incompetent"]
    detected = counts["killed"] + counts["timeout"]
    covered = judged - counts["uncovered"]
    return {"counts": counts, "judged": judged,
            "score": round(detected / judged, 4) if judged else None,
            "score_of_covered": round(detected / covered, 4) if covered else None}
