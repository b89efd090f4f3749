"""The two ways into the library, side by side: `conformance run` and the pytest path on the same
selection, compared scenario by scenario and report by report.

    .venv/bin/python -m tests.conformance.parity                                 # the whole library
    .venv/bin/python -m tests.conformance.parity --scenario 'timers/*' --worker dapr-ext-workflow --sdk-version 1.16.3
    .venv/bin/python -m tests.conformance.parity --keep /tmp/parity              # keep both runs' folders

It runs `conformance run --reports A` and `pytest scenarios -n N --conformance-reports B --alluredir C`
(one after the other, each timed, from this checkout with relative scenario paths as a user types
them) and compares, per scenario and pair:

- events.jsonl: outcome, per-requirement verdicts, broken requirements, gap reason, title, source,
  the failure text and the `Reproduce with:` line;
- junit.xml: each testcase's element, attributes and texts (time aside);
- summary.json: counts, per pair, the requirement cells, failures and passed gaps (ids and times aside);
- matrix.md: line by line (the run's header aside); which scenarios have a log file (reports/logs/);
- allure: each result's name, status, status message and trace, description, our labels, parameters,
  attachments (name, type, body), and start/stop against the scenario's own start and duration.

What differs between any two runs is masked first: generated instance ids, ports, times and durations,
the run id, the command, each run's own report folder. Exit 0 when nothing else differs, 1 with the
differences listed. tests/conformance/test_parity.py runs it on a sample in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Labels `conformance.reporting.allure` gives a result (allure-pytest adds host, thread, framework, ...).
OUR_LABELS = ("parentSuite", "suite", "subSuite", "feature", "story", "tag", "severity")
# Start and stop are the scenario's own: within this much of the events' started_at and duration.
TIME_SLACK_MS = 50


@dataclass(frozen=True, kw_only=True)
class Runs:
    """Where the two runs wrote: the CLI's reports (allure inside) and the pytest path's."""

    cli_reports: Path
    py_reports: Path
    py_allure: Path
    cli_wall_s: float = 0.0
    py_wall_s: float = 0.0
    cli_exit: int = 0
    py_exit: int = 0


@dataclass(frozen=True, kw_only=True)
class Parity:
    compared: int  # scenario results compared (scenario x pair)
    outcomes: dict[str, int]
    differences: tuple[str, ...]
    # Transcripts with the same kinds of message in another number or order (a race's other outcome), as
    # between two runs of the same path (`--twice` measures that): shown, not counted as differences.
    details: tuple[str, ...] = ()


def run_both(*, work: Path, selection: list[str], pair: list[str], processes: int = 2,
             cwd: Path = ROOT, scenarios: str = "scenarios") -> Runs:
    """Run the selection both ways from `cwd` (its `scenarios` folder, relative as a user gives it)."""
    cli_reports, py_reports, py_allure = work / "cli", work / "pytest", work / "pytest-allure"
    cli = [_console_script(), "run", "--scenarios", scenarios, "--reports", str(cli_reports), *pair, *selection]
    py = [sys.executable, "-m", "pytest", scenarios, "-q", "-p", "no:cacheprovider", "-n", str(processes),
          "--conformance-reports", str(py_reports), "--alluredir", str(py_allure),
          *(w.replace("--", "--conformance-", 1) if w.startswith("--") else w for w in [*pair, *selection])]
    cli_wall, cli_exit = _timed("conformance run", cli, cwd=cwd)
    py_wall, py_exit = _timed("pytest", py, cwd=cwd)
    return Runs(cli_reports=cli_reports, py_reports=py_reports, py_allure=py_allure, cli_wall_s=cli_wall,
                py_wall_s=py_wall, cli_exit=cli_exit, py_exit=py_exit)


def run_cli_twice(runs: Runs, *, work: Path, selection: list[str], pair: list[str], cwd: Path = ROOT,
                  scenarios: str = "scenarios") -> Runs:
    """`conformance run` once more, as the other side of `runs`' CLI run: what differs between two runs
    of one path."""
    again = work / "cli-again"
    wall, code = _timed("conformance run", [_console_script(), "run", "--scenarios", scenarios, "--reports",
                                            str(again), *pair, *selection], cwd=cwd)
    return Runs(cli_reports=runs.cli_reports, py_reports=again, py_allure=again / "allure-results",
                cli_wall_s=runs.cli_wall_s, py_wall_s=wall, cli_exit=runs.cli_exit, py_exit=code)


def _timed(name: str, argv: list[str], *, cwd: Path) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not a worker of an outer run
    began = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=7200)
    wall = time.monotonic() - began
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{name} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return wall, done.returncode


def _console_script() -> str:
    """`conformance` beside this interpreter: the CLI as an installed user runs it."""
    script = Path(sys.executable).with_name("conformance")
    return str(script) if script.exists() else "conformance"


# ------------------------------------------------------------------------------------------ masking

_MASKS = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"-[0-9a-f]{6}\b"), "-<id>"),  # generated instance ids
    (re.compile(r"\b[0-9a-f]{32}\b"), "<hex32>"),  # instance ids of vectors, hashes
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"conformance-[a-z0-9_]{8}\b"), "conformance-<tmp>"),  # a scenario's temporary folder
    (re.compile(r"localhost:\d+"), "localhost:<port>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s)\b"), "<t>"),  # durations in text
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
)


def masked(text: str, runs: Runs | None = None) -> str:
    if runs is not None:  # each run's own folder
        # the longest first: one folder's name may start with another's (cli, cli-again)
        for folder in sorted((runs.cli_reports, runs.py_reports, runs.py_allure), key=lambda f: -len(str(f.resolve()))):
            text = text.replace(str(folder.resolve()), "<reports>").replace(str(folder), "<reports>")
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return _TOKEN.sub("token=<token>", text)


# --------------------------------------------------------------------------------------- comparing


def compare(runs: Runs) -> Parity:
    from conformance.events import ScenarioFinished
    from conformance.reporting import read_events

    diffs: list[str] = []
    cli = {(e.scenario, e.pair): e for e in read_events(runs.cli_reports / "events.jsonl")
           if isinstance(e, ScenarioFinished)}
    py = {(e.scenario, e.pair): e for e in read_events(runs.py_reports / "events.jsonl")
          if isinstance(e, ScenarioFinished)}
    for key in sorted(set(cli) ^ set(py)):
        diffs.append(f"{key[0]} [{key[1]}]: only in {'conformance run' if key in cli else 'pytest'}")
    both = sorted(set(cli) & set(py))
    for key in both:
        diffs += [f"{key[0]} [{key[1]}] events: {d}" for d in _event_diffs(cli[key], py[key], runs)]
    diffs += [f"junit: {d}" for d in _junit_diffs(runs)]
    diffs += [f"summary.json: {d}" for d in _summary_diffs(runs)]
    diffs += [f"matrix.md: {d}" for d in _matrix_diffs(runs)]
    logs = [{p.relative_to(r / "logs") for p in (r / "logs").rglob("*.log")} - {Path("run.log")}
            for r in (runs.cli_reports, runs.py_reports)]
    diffs += [f"logs: {p} only in {'conformance run' if p in logs[0] else 'pytest'}" for p in sorted(logs[0] ^ logs[1])]
    details: list[str] = []
    diffs += [f"allure: {d}" for d in _allure_diffs(runs, cli={k: cli[k] for k in both}, py={k: py[k] for k in both},
                                                    details=details)]
    outcomes: dict[str, int] = {}
    for key in both:
        outcomes[cli[key].outcome.value] = outcomes.get(cli[key].outcome.value, 0) + 1
    return Parity(compared=len(both), outcomes=outcomes, differences=tuple(diffs), details=tuple(details))


_EVENT_FIELDS = ("outcome", "verdicts", "broken", "gap_reason", "gap_passed", "title", "source", "requirements",
                 "sidecar", "worker", "message", "reproduce", "observations")


def _event_diffs(a, b, runs: Runs) -> Iterator[str]:
    for name in _EVENT_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, str):
            x, y = masked(x, runs), masked(y, runs)
        elif name == "observations":  # (field, text) pairs: the texts name instances
            x, y = [(f, masked(t, runs)) for f, t in x], [(f, masked(t, runs)) for f, t in y]
        if x != y:
            yield f"{name}: {_show(x)} != {_show(y)}"
    if bool(a.transcript) != bool(b.transcript):
        yield f"transcript: {len(a.transcript)} entries != {len(b.transcript)}"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) < 600 else text[:300] + " ... " + text[-300:]


def _junit_cases(path: Path, runs: Runs) -> dict[tuple[str, str], str]:
    root = ET.parse(path).getroot()
    cases = {}
    for case in root.iter("testcase"):
        case.attrib.pop("time", None)
        case.tail = None  # the last case of a suite ends with less indentation
        for out in case.iter("system-out"):  # a transcript: its messages as a multiset, as in allure's
            out.text = "\n".join(sorted(masked(out.text or "", runs).splitlines()))
        for err in case.iter("system-err"):  # the scenario's log: its file (its lines are the run's own)
            err.text = (err.text or "").split("\n", 1)[0]
        ET.indent(case)
        cases[(case.get("classname", ""), case.get("name", ""))] = masked(ET.tostring(case, encoding="unicode"), runs)
    return cases


def _junit_diffs(runs: Runs) -> Iterator[str]:
    a = _junit_cases(runs.cli_reports / "junit.xml", runs)
    b = _junit_cases(runs.py_reports / "junit.xml", runs)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            yield f"testcase {key[1]} [{key[0]}]: {_first_difference(a.get(key, ''), b.get(key, ''))}"
    totals = [{k: v for k, v in ET.parse(r / "junit.xml").getroot().attrib.items() if k != "time"}
              for r in (runs.cli_reports, runs.py_reports)]
    if totals[0] != totals[1]:
        yield f"totals {totals[0]} != {totals[1]}"


def _summary_diffs(runs: Runs) -> Iterator[str]:
    def load(folder: Path) -> dict:
        data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        for key in ("run_id", "command", "started_at", "started", "finished_at", "finished", "duration_s"):
            data.pop(key, None)
        data["failures"] = sorted(data["failures"], key=lambda f: (f["scenario"], f["pair"]))
        return json.loads(masked(json.dumps(data, sort_keys=True), runs))

    a, b = load(runs.cli_reports), load(runs.py_reports)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            yield f"{key}: {_first_difference(json.dumps(a.get(key), indent=1), json.dumps(b.get(key), indent=1))}"


def _matrix_diffs(runs: Runs) -> Iterator[str]:
    def lines(folder: Path) -> list[str]:
        text = masked((folder / "matrix.md").read_text(encoding="utf-8"), runs)
        # the run's id, time and command
        return [line for line in text.splitlines() if not line.startswith(("run ", "Command: "))]

    a, b = lines(runs.cli_reports), lines(runs.py_reports)
    if a != b:
        yield _first_difference("\n".join(a), "\n".join(b))


def _first_difference(a: str, b: str) -> str:
    al, bl = a.splitlines(), b.splitlines()
    for n, (x, y) in enumerate(zip(al, bl)):
        if x != y:
            return f"line {n + 1}: {x.strip()[:300]!r} != {y.strip()[:300]!r}"
    return f"{len(al)} lines != {len(bl)} lines (first extra: {(al + bl)[min(len(al), len(bl))][:300]!r})"


# ------------------------------------------------------------------------------------------ allure


@dataclass(frozen=True, kw_only=True)
class _AllureResult:
    key: tuple[str, str]  # (scenario, pair)
    raw: dict
    folder: Path

    def label_values(self) -> list[tuple[str, str]]:
        return sorted((label["name"], label["value"]) for label in self.raw.get("labels", [])
                      if label["name"] in OUR_LABELS)

    def attachments(self, runs: Runs) -> list[tuple[str, str, str]]:
        return sorted((a["name"], a["type"], _attachment_body(a["type"], (self.folder / a["source"]).read_text(
            encoding="utf-8"), runs)) for a in self.raw.get("attachments", []))


def _attachment_body(mime: str, body: str, runs: Runs) -> str:
    """An attachment without what differs between any two runs: times, tokens, ids; the transcript's
    messages as a multiset (the worker's connection and the client's first call race); a timeline by
    its number of messages."""
    body = masked(body, runs)
    if mime == "application/json":
        entries = [{k: v for k, v in e.items() if k != "t"} for e in json.loads(body)]
        return "\n".join(sorted(json.dumps(e, sort_keys=True) for e in entries))
    if mime == "image/svg+xml":
        return f"svg: {body.lstrip().startswith('<svg')}, {body.count('<title>')} titles"
    return "\n".join(sorted(body.splitlines()))


def _message_kinds(body: str) -> set[tuple[str, str, str]]:
    """The kinds of message a transcript (its JSON attachment, as `_attachment_body` leaves it) holds."""
    return {(e["channel"], e["direction"], e["rpc"]) for e in map(json.loads, body.splitlines())}


_TOKEN = re.compile(r"token=[0-9a-f]+")


def _allure_results(folder: Path) -> dict[tuple[str, str], _AllureResult]:
    out: dict[tuple[str, str], _AllureResult] = {}
    for path in sorted(folder.glob("*-result.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        labels = {label["name"]: label["value"] for label in raw.get("labels", [])}
        key = (labels.get("story", ""), labels.get("parentSuite", ""))
        if key in out:
            raise ValueError(f"{folder}: two results for {key}")
        out[key] = _AllureResult(key=key, raw=raw, folder=folder)
    return out


def _allure_diffs(runs: Runs, *, cli: dict, py: dict, details: list[str]) -> Iterator[str]:
    a = _allure_results(runs.cli_reports / "allure-results")
    b = _allure_results(runs.py_allure)
    for key in sorted(set(a) ^ set(b)):
        yield f"{key[0]} [{key[1]}]: result only in {'conformance run' if key in a else 'pytest'}"
    for key in sorted(set(a) & set(b)):
        x, y = a[key], b[key]
        where = f"{key[0]} [{key[1]}]"
        for field in ("name", "status", "description", "fullName", "historyId", "testCaseId"):
            if masked(str(x.raw.get(field)), runs) != masked(str(y.raw.get(field)), runs):
                yield f"{where} {field}: {_show(x.raw.get(field))} != {_show(y.raw.get(field))}"
        for field in ("message", "trace"):
            m = masked(str((x.raw.get("statusDetails") or {}).get(field) or ""), runs)
            n = masked(str((y.raw.get("statusDetails") or {}).get(field) or ""), runs)
            if m != n:
                yield f"{where} statusDetails.{field}: {_first_difference(m, n)}"
        if x.label_values() != y.label_values():
            yield f"{where} labels: {x.label_values()} != {y.label_values()}"
        params = [sorted((p["name"], p["value"]) for p in r.raw.get("parameters", [])) for r in (x, y)]
        if params[0] != params[1]:
            yield f"{where} parameters: {params[0]} != {params[1]}"
        xa, ya = x.attachments(runs), y.attachments(runs)
        if [t[:2] for t in xa] != [t[:2] for t in ya]:
            yield f"{where} attachments: {[t[:2] for t in xa]} != {[t[:2] for t in ya]}"
        else:
            for (name, mime, body), (_, _, other) in zip(xa, ya):
                if body == other:
                    continue
                if mime == "application/json" and _message_kinds(body) != _message_kinds(other):
                    yield (f"{where} attachment {name!r}: other kinds of message: "
                           f"{sorted(_message_kinds(body) ^ _message_kinds(other))}")
                else:  # the same kinds of message, in another number or order: as two runs of one path
                    details.append(f"{where} attachment {name!r}: {_first_difference(body, other)}")
        for run_name, result, event in (("conformance run", x, cli.get(key)), ("pytest", y, py.get(key))):
            if event is None:
                continue
            start, stop = result.raw.get("start", 0), result.raw.get("stop", 0)
            want_start = round(event.started_at * 1000)
            want_stop = want_start + round(event.duration_s * 1000)
            if abs(start - want_start) > TIME_SLACK_MS or abs(stop - want_stop) > TIME_SLACK_MS:
                yield (f"{where} {run_name}: start/stop {start}/{stop} are not the scenario's "
                       f"{want_start}/{want_stop} (ms)")
    for name in ("categories.json",):
        if (runs.cli_reports / "allure-results" / name).read_text() != (runs.py_allure / name).read_text():
            yield f"{name} differs"


# ------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB")
    p.add_argument("--area", action="append", default=[])
    p.add_argument("--worker")
    p.add_argument("--sidecar")
    p.add_argument("--sdk-version")
    p.add_argument("--jobs", type=int, default=6)
    p.add_argument("-n", "--processes", type=int, default=2, help="pytest-xdist workers (default 2)")
    p.add_argument("--fail-on", action="append", default=[], metavar="LEVEL")
    p.add_argument("--twice", action="store_true",
                   help="also run `conformance run` a second time and show what differs between two runs of it")
    p.add_argument("--keep", type=Path, help="write both runs here (kept) instead of a temporary folder")
    args = p.parse_args(argv)
    selection = [w for g in args.scenario for w in ("--scenario", g)] + [w for a in args.area for w in ("--area", a)]
    pair = [*(["--worker", args.worker] if args.worker else []), *(["--sidecar", args.sidecar] if args.sidecar else []),
            *(["--sdk-version", args.sdk_version] if args.sdk_version else []), "--jobs", str(args.jobs),
            *(w for level in args.fail_on for w in ("--fail-on", level))]
    with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; cores: {os.cpu_count()}",
              flush=True)
        runs = run_both(work=work, selection=selection, pair=pair, processes=args.processes)
        parity = compare(runs)
        again = None
        if args.twice:
            again = compare(run_cli_twice(runs, work=work, selection=selection, pair=pair))
    print(f"conformance run: {runs.cli_wall_s:.1f} s wall (exit {runs.cli_exit}); "
          f"pytest -n {args.processes}: {runs.py_wall_s:.1f} s wall (exit {runs.py_exit}); "
          f"ratio {runs.py_wall_s / runs.cli_wall_s:.2f}")
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{parity.compared} scenario results compared ({', '.join(f'{n} {o}' for o, n in sorted(parity.outcomes.items()))}); "
          f"{len(parity.differences)} differences")
    for d in parity.differences:
        print(f"  - {d}")
    print(f"{len(parity.details)} transcripts with the same kinds of message in another number or order")
    for d in parity.details:
        print(f"  . {d}")
    if again is not None:
        print(f"conformance run twice: {len(again.differences)} differences, {len(again.details)} such transcripts")
        for d in again.differences:
            print(f"  - {d}")
    if runs.cli_exit != runs.py_exit:
        print(f"  - exit codes differ: conformance run {runs.cli_exit}, pytest {runs.py_exit}")
        return 1
    return 1 if parity.differences else 0


if __name__ == "__main__":
    sys.exit(main())
