"""The corpus of recorded histories (histories/ at the library root): what each engine recorded with
each SDK release, replayed against any SDK release.

Layout: `histories/<scenario id>/bundle.json` (the scenario's programs, what a driver is started with)
and `histories/<scenario id>/<engine>-<version>/<sdk>-<version>/<instance>.history.json`, each a
`conformance capture` file (taskhub-conformance/history v1) with a `recorded` object naming the
engine and SDK releases and the scenario. Readers of the capture format ignore `recorded`.

Recording: a `conformance run` with $CONFORMANCE_RECORD_HISTORIES=DIR set writes, for each flow
scenario, the final history of every instance that reached a terminal status to
DIR/<scenario id>/ (`record_if_asked`, called by the runner once it has observed the instances);
`assemble` then keeps those of scenarios that PASSED and files them under their releases.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.versions.explained import EXPLAINED, Explanation

RECORD_ENV = "CONFORMANCE_RECORD_HISTORIES"
BUNDLE = "bundle.json"
TERMINAL = ("COMPLETED", "FAILED", "TERMINATED")


def record_if_asked(*, scenario_id: str, kind: str, programs_doc: Mapping[str, Any], iids: Iterable[str],
                    fetch: Callable[[str], tuple[Any, Sequence[Any]]]) -> None:
    """Writes the terminal instances' histories of a flow scenario when $CONFORMANCE_RECORD_HISTORIES is
    set. `fetch(iid)` is (WorkflowState, history events) as GetInstance/GetInstanceHistory report them.
    Only "flow": a vector's history is the scenario's own, and a "redeployed" flow (a worker restarted with
    other programs or versions) has no one bundle its histories replay against.
    Never raises: recording must not change a run's verdict (a failure leaves a note file instead)."""
    out = os.environ.get(RECORD_ENV)
    if not out or kind != "flow":
        return
    from conformance.replay.history import make, status_name, write

    folder = Path(out) / scenario_id
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / BUNDLE).write_text(json.dumps({"programs": programs_doc}, indent=1, default=str) + "\n",
                                     encoding="utf-8")
        for iid in dict.fromkeys(iids):
            state, events = fetch(iid)
            if state is None or not events or status_name(state.workflowStatus) not in TERMINAL:
                continue
            write(make(state=state, events=events, source=f"conformance run {scenario_id}"), folder)
    except Exception as exc:  # noqa: BLE001 - a recording problem is reported beside the corpus, never raised
        with open(Path(out) / "record-errors.txt", "a", encoding="utf-8") as fh:
            fh.write(f"{scenario_id}: {type(exc).__name__}: {exc}\n")


@dataclass(frozen=True, kw_only=True)
class Recorded:
    engine: str
    engine_version: str
    sdk: str
    sdk_version: str

    @property
    def folder(self) -> str:
        return f"{self.engine}-{self.engine_version}/{self.sdk}-{self.sdk_version}"

    def as_dict(self) -> dict[str, str]:
        return {"engine": self.engine, "engineVersion": self.engine_version, "sdk": self.sdk,
                "sdkVersion": self.sdk_version}


def scrub(text: str, places: Mapping[str, Path]) -> str:
    """`text` with each machine path of `places` (longest first) written as its name, e.g. <cache>: the
    stack traces an SDK records name the files it ran from, and the corpus is kept in the repository."""
    for name, path in sorted(places.items(), key=lambda kv: -len(str(kv[1]))):
        text = text.replace(str(path), f"<{name}>")
    return text


def assemble(staging: Path, *, passed: set[str], corpus: Path, recorded: Recorded,
             places: Mapping[str, Path] | None = None) -> list[Path]:
    """Files the staged histories of the PASSED scenarios under `corpus` (replacing what this engine and
    SDK release recorded before for them, machine paths scrubbed) and returns the files written."""
    written: list[Path] = []
    for bundle in sorted(staging.rglob(BUNDLE)):
        scenario = bundle.parent.relative_to(staging).as_posix()
        files = sorted(bundle.parent.glob("*.history.json"))
        if scenario not in passed or not files:
            continue
        dest = corpus / scenario / recorded.folder
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        shutil.copy2(bundle, corpus / scenario / BUNDLE)
        for f in files:
            doc = json.loads(f.read_text(encoding="utf-8"))
            doc["recorded"] = {**recorded.as_dict(), "scenario": scenario}
            doc["capturedAt"] = ""  # the corpus changes only when what was recorded changes
            target = dest / f.name
            target.write_text(scrub(json.dumps(doc, indent=1, ensure_ascii=False), places or {}) + "\n",
                              encoding="utf-8")
            written.append(target)
    return written


@dataclass(frozen=True, kw_only=True)
class Group:
    """One scenario's histories in the corpus: replayed by one driver started with its bundle."""

    scenario: str
    bundle: Path
    histories: tuple[Path, ...]


def groups(corpus: Path, *, sdk: str | None = None, scenarios: Sequence[str] = (),
           recorded: Sequence[str] = ()) -> list[Group]:
    """The corpus's scenarios with their histories; with `sdk`, only those recorded with that SDK line
    (any release, any engine): forward compatibility is a line's promise, and another SDK's histories
    differ by what the contract leaves to each SDK (ids, optional timers). `recorded` globs select
    recordings by their folder `<engine>-<version>/<sdk>-<version>`."""
    import fnmatch

    out = []
    for bundle in sorted(corpus.rglob(BUNDLE)):
        scenario = bundle.parent.relative_to(corpus).as_posix()
        if scenarios and not any(fnmatch.fnmatch(scenario, g) for g in scenarios):
            continue
        files = tuple(f for f in sorted(bundle.parent.rglob("*.history.json"))
                      if (sdk is None or f.parent.name.startswith(f"{sdk}-"))
                      and (not recorded or any(fnmatch.fnmatch(f.parent.relative_to(bundle.parent).as_posix(), g)
                                               for g in recorded)))
        if files:
            out.append(Group(scenario=scenario, bundle=bundle, histories=files))
    return out


def recorded_of(path: Path) -> dict[str, str]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return dict(doc.get("recorded") or {})


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """One history of the corpus replayed against one SDK release."""

    scenario: str
    file: str  # relative to the corpus
    recorded: Mapping[str, str]
    verdict: str  # the replay verdict (CLEAN, NONDETERMINISM, ...), or WORKER for a driver that did not start
    headline: str


def replay_corpus(corpus: Path, *, command: str, reports: Path, sdk: str | None, scenarios: Sequence[str] = (),
                  recorded: Sequence[str] = (), jobs: int = 4,
                  log: Callable[[str], None] = print) -> list[Replayed]:
    """Every group of the corpus replayed by `conformance replay`, one driver per scenario (started with
    its bundle through `command`'s {programs}/{canonical}/{root} placeholders)."""
    import shlex
    import subprocess
    import sys

    from conformance.library import find_library
    from taskhub_programs import canonical_form

    root = find_library().root
    out: list[Replayed] = []
    for g in groups(corpus, sdk=sdk, scenarios=scenarios, recorded=recorded):
        work = reports / "groups" / g.scenario
        work.mkdir(parents=True, exist_ok=True)
        doc = json.loads(g.bundle.read_text(encoding="utf-8"))
        canonical = work / "bundle.canonical.json"
        canonical.write_text(json.dumps(canonical_form(doc["programs"]), indent=1), encoding="utf-8")
        cmd = (command.replace("{programs}", shlex.quote(str(g.bundle))).replace("{canonical}", shlex.quote(str(canonical)))
               .replace("{root}", shlex.quote(str(root))).replace("{python}", shlex.quote(sys.executable)))
        argv = [sys.executable, "-m", "conformance", "replay", *map(str, g.histories), "--worker-command", cmd,
                "--reports", str(work), "--jobs", str(jobs), "--timeout", "60", "-q"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True, env=env, timeout=1800)
        summary = work / "summary.json"
        if not summary.is_file():
            why = (done.stderr or done.stdout).strip().splitlines()
            for f in g.histories:
                out.append(Replayed(scenario=g.scenario, file=f.relative_to(corpus).as_posix(), recorded=recorded_of(f),
                                    verdict="WORKER", headline=why[-1] if why else f"exit {done.returncode}"))
            log(f"corpus: {g.scenario}: the replay did not run ({out[-1].headline})")
            continue
        by_file = {Path(i["file"]).resolve(): i for i in json.loads(summary.read_text(encoding="utf-8"))["instances"]}
        for f in g.histories:
            i = by_file.get(f.resolve(), {"verdict": "MISSING", "headline": "not in the replay's summary"})
            out.append(Replayed(scenario=g.scenario, file=f.relative_to(corpus).as_posix(), recorded=recorded_of(f),
                                verdict=str(i["verdict"]), headline=str(i["headline"])))
        bad = [r for r in out[-len(g.histories):] if r.verdict != "CLEAN"]
        log(f"corpus: {g.scenario}: {len(g.histories) - len(bad)}/{len(g.histories)} clean")
    return out


@dataclass(frozen=True, kw_only=True)
class Judged:
    """A corpus replay held against explained.yaml: what failed as traced, what nobody traced, and the
    explanations that no longer happen (their histories replayed otherwise)."""

    results: tuple[Replayed, ...]
    explained: tuple[tuple[Replayed, Explanation], ...]
    unexplained: tuple[Replayed, ...]
    stale: tuple[Explanation, ...]

    @property
    def ok(self) -> bool:
        return not self.unexplained and not self.stale


def judge_replay(results: Sequence[Replayed], explanations: Sequence[Explanation], *, sdk: str,
                 release: str) -> Judged:
    from conformance.versions.explained import explanation_for

    explained, unexplained = [], []
    for r in results:
        if r.verdict == "CLEAN":
            continue
        e = explanation_for(explanations, sdk=sdk, release=release, file=r.file, verdict=r.verdict)
        if e is None:
            unexplained.append(r)
        else:
            explained.append((r, e))
    used = {id(e) for _, e in explained}
    stale = tuple(e for e in explanations if id(e) not in used
                  and any(e.applies(sdk=sdk, release=release, file=r.file) for r in results))
    return Judged(results=tuple(results), explained=tuple(explained), unexplained=tuple(unexplained), stale=stale)


def render_replay(judged: Judged, *, sdk: str) -> str:
    results = judged.results
    clean = sum(r.verdict == "CLEAN" for r in results)
    lines = [f"# The history corpus replayed on {sdk}", "",
             f"{len(results)} histories of {len({r.scenario for r in results})} scenarios: {clean} replay cleanly, "
             f"{len(results) - clean} do not ({len(judged.explained)} of them traced in {EXPLAINED}).", ""]
    by_rec: dict[str, list[Replayed]] = {}
    for r in results:
        key = (f"{r.recorded.get('engine', '?')} {r.recorded.get('engineVersion', '?')} with "
               f"{r.recorded.get('sdk', '?')} {r.recorded.get('sdkVersion', '?')}")
        by_rec.setdefault(key, []).append(r)
    lines += ["| recorded on | histories | clean | not clean |", "|---|---:|---:|---:|"]
    for key, rs in sorted(by_rec.items()):
        ok = sum(r.verdict == "CLEAN" for r in rs)
        lines.append(f"| {key} | {len(rs)} | {ok} | {len(rs) - ok} |")
    lines += ["", "## What does not replay cleanly, untraced", ""]
    lines += [f"- `{r.file}`: {r.verdict}: {r.headline}" for r in judged.unexplained] or ["Nothing."]
    lines += ["", f"## Expected failures, traced ({EXPLAINED})", ""]
    lines += [f"- `{r.file}`: {r.verdict}: {r.headline}\n  - trace: {e.trace}\n  - fixed by: {e.fixed_by}"
              for r, e in judged.explained] or ["None."]
    if judged.stale:
        lines += ["", f"## Stale explanations ({EXPLAINED}): their histories replayed otherwise", ""]
        lines += [f"- `{e.histories}` ({e.verdict.name}, fixed by {e.fixed_by})" for e in judged.stale]
    return "\n".join(lines) + "\n"
