"""The options of a conformance run, defined once for both ways of running the library.

`conformance run --worker X` and `pytest scenarios/ --conformance-worker X` take the same options:
each is declared here once (`RUN_OPTIONS`) and added to argparse with `--NAME` and to pytest with
`--conformance-NAME`; both paths read them into one frozen `RunOptions` and hand it to
`prepare_run`, which checks the selection and the targets and builds the pairs, so a mistake is
reported the same way (before any scenario runs) and a scenario gets the same pair either way.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from conformance.errors import InputError
from conformance.verdict import Outcome

# --fail-on LEVEL -> the outcomes it adds to FAILED and ERROR, which always fail a run.
FAIL_ON = {"must": (), "should": (Outcome.WARNING,), "observation": (Outcome.OBSERVATION,),
           "known": (Outcome.KNOWN_FAILURE,)}
PYTEST_PREFIX = "--conformance-"


class UsageError(InputError):
    pass


def parse_fail_on(text: str) -> tuple[Outcome, ...]:
    out: list[Outcome] = []
    for word in (w.strip().lower() for w in text.split(",") if w.strip()):
        if word not in FAIL_ON:
            raise argparse.ArgumentTypeError(f"unknown level {word!r}; one of {', '.join(FAIL_ON)}")
        out += FAIL_ON[word]
    return tuple(out)


def failing_outcomes(fail_on: Sequence[Sequence[Outcome]] = ()) -> frozenset[Outcome]:
    """The outcomes that make a run fail."""
    return frozenset({Outcome.FAILED, Outcome.ERROR, *(o for group in fail_on for o in group)})


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option of a run: its name (the flag without dashes) and argparse keywords."""

    name: str
    kwargs: tuple[tuple[str, Any], ...]
    cli_only: bool = False  # e.g. --scenarios: pytest collects the paths it is given instead

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


DEFAULT_JOBS = 6
# The reference pair lends a waiting scenario's slot (conformance/runner/slots.py), so a process keeps this
# many at work: measured on 2 cores, 3 per process ran the library in 7.8-8.2 s against 9.9-10.1 s for 6 in all.
JOBS_PER_PROCESS = 3


def _opt(name: str, *, cli_only: bool = False, **kwargs: Any) -> OptionSpec:
    return OptionSpec(name=name, kwargs=tuple(kwargs.items()), cli_only=cli_only)


RUN_OPTIONS: tuple[OptionSpec, ...] = (
    _opt("scenarios", type=Path, default=None, cli_only=True,
         help="scenario folder (default: the shipped library, see `conformance --version`)"),
    _opt("scenario", action="append", default=[], metavar="GLOB",
         help="only scenarios whose id matches (repeatable), e.g. 'patching/*'"),
    _opt("requirement", action="append", default=[], metavar="ID",
         help="only scenarios covering this requirement (repeatable)"),
    _opt("area", action="append", default=[], metavar="AREA",
         help="only scenarios of this area (repeatable): its folder, or covering a requirement of that area "
              "in the catalogue, e.g. events, timers, continue-as-new"),
    _opt("last-failed", action="store_true",
         help="only the scenarios that failed or errored in the last run written to the reports folder"),
    _opt("sidecar", action="append", default=[], metavar="NAME",
         help="sidecar target from targets.yaml (repeatable; default reference)"),
    _opt("worker", action="append", default=[], metavar="NAME",
         help="worker target from targets.yaml (repeatable; default reference)"),
    _opt("sidecar-address", default=None, metavar="HOST:PORT", help="for --sidecar address: a sidecar you run"),
    _opt("worker-command", default=None, metavar="CMD",
         help="for --worker command: your worker, with {address} and {programs} placeholders "
              "(with a declared SDK worker: replaces its command, keeps its capabilities and gaps)"),
    _opt("sdk-path", type=Path, default=None, metavar="PATH",
         help="the SDK from your local checkout instead of the pinned release: python-sdk's or "
              "durabletask-python's repository root, a durabletask-js, durabletask-go or durabletask-java "
              "checkout (the worker is the checkout's; its environment is made once, in the user cache, "
              "and follows the checkout)"),
    _opt("sdk-version", default=None, metavar="V",
         help="another release of the worker's SDK instead of the pin (with one --worker NAME, e.g. "
              "dapr-ext-workflow --sdk-version 1.16.3): its environment is made once in the user cache, "
              "keyed by release; what the release lacks is probed from its API and taken off the "
              "target's capabilities"),
    _opt("capability", action="append", default=[], metavar="NAME",
         help="a capability of the worker under test (repeatable), e.g. ids_from_one; "
              "the names are listed in conformance/targets/targets.yaml"),
    _opt("gap", action="append", default=[], metavar="REQ[@GLOB]=REASON",
         help="a requirement the worker under test is known not to meet (repeatable)"),
    _opt("sidecar-capability", action="append", default=[], metavar="NAME",
         help="a capability of the sidecar under test (repeatable), e.g. restart"),
    _opt("sidecar-gap", action="append", default=[], metavar="REQ[@GLOB]=REASON",
         help="a requirement the sidecar under test is known not to meet (repeatable)"),
    _opt("engine-setting", action="append", default=[], metavar="NAME=VALUE",
         help="a setting of the engine under test for every scenario that does not give it itself "
              "(repeatable; the settings of a scenario's `engine:`, docs/scenarios.md), e.g. "
              "late_timeout_timers=true: a won wait's timeout timer still fires (R6.3)"),
    _opt("targets", type=Path, action="append", default=[], metavar="FILE",
         help="a targets file that adds to the built-in targets (repeatable); see `conformance init-target`"),
    _opt("reports", type=Path, default=None,
         help="report folder (default reports/: the checkout's, or in the working directory; "
              "with pytest: no reports unless given)"),
    _opt("no-reports", action="store_true", help="only the terminal output"),
    _opt("jobs", type=int, default=None,
         help=f"scenarios at work at once, shared out among --processes (default {DEFAULT_JOBS}; on the reference "
              f"pair {JOBS_PER_PROCESS} per process; with pytest: shared out among -n's workers); on the reference "
              "pair, scenarios that wait do not count"),
    _opt("processes", type=int, default=None, cli_only=True, metavar="N",
         help="processes that run the scenarios, each with its own engines and its share of --jobs "
              "(default: on the reference pair one per core and one more, at most 4; else 1, all in this process). The harness, "
              "the reference engine and the reference worker are Python, so one process uses one core"),
    _opt("fresh-workers", action="store_true", cli_only=True,
         help="a fresh worker process per scenario even for a target that can be kept warm (its `serve:`, "
              "conformance/targets/warm.py)"),
    _opt("fail-on", action="append", default=[], metavar="LEVEL", type=parse_fail_on,
         help="also fail on: should (warnings), observation (differences from the reference), "
              "known (declared known failures); repeatable or comma-separated. Default: MUST failures "
              "and errors only"),
)


def add_to_argparse(parser: argparse.ArgumentParser, *, names: Sequence[str] | None = None) -> None:
    for spec in RUN_OPTIONS:
        if names is None or spec.name in names:
            parser.add_argument(f"--{spec.name}", **dict(spec.kwargs))


def add_to_pytest(add: Callable[..., Any]) -> None:
    """`add` is a pytest option group's `addoption`."""
    for spec in RUN_OPTIONS:
        if not spec.cli_only:
            add(f"{PYTEST_PREFIX}{spec.name}", dest=f"conformance_{spec.dest}", **dict(spec.kwargs))


_MAY_BE_NONE = ("scenarios", "reports", "sidecar_address", "worker_command", "sdk_path", "sdk_version", "processes")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    scenarios: Path | None = None
    scenario: tuple[str, ...] = ()
    requirement: tuple[str, ...] = ()
    area: tuple[str, ...] = ()
    last_failed: bool = False
    sidecar: tuple[str, ...] = ()
    worker: tuple[str, ...] = ()
    sidecar_address: str | None = None
    worker_command: str | None = None
    sdk_path: Path | None = None
    sdk_version: str | None = None
    capability: tuple[str, ...] = ()
    gap: tuple[str, ...] = ()
    sidecar_capability: tuple[str, ...] = ()
    sidecar_gap: tuple[str, ...] = ()
    engine_setting: tuple[str, ...] = ()
    targets: tuple[Path, ...] = ()
    reports: Path | None = None
    no_reports: bool = False
    jobs: int | None = None  # None: DEFAULT_JOBS, or JOBS_PER_PROCESS per process on the reference pair
    processes: int | None = None  # None: 1, all in this process (conformance/runner/processes.py)
    fresh_workers: bool = False  # no warm driver processes (conformance/targets/warm.py)
    fail_on: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def read(cls, get: Callable[[str], Any]) -> RunOptions:
        """From `get(dest)`: `vars(args).get` for argparse, `lambda d: config.getoption(f"conformance_{d}")`."""
        values: dict[str, Any] = {}
        for spec in RUN_OPTIONS:
            value = get(spec.dest)
            if isinstance(value, list):
                value = tuple(value)
            if value is not None or spec.dest in _MAY_BE_NONE:
                values[spec.dest] = value
        return cls(**values)

    @property
    def failing(self) -> frozenset[Outcome]:
        return failing_outcomes(self.fail_on)


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRun:
    """What a run needs once its options are checked: the catalogue, the pairs, the reproduce options."""

    scenarios: tuple[Any, ...]
    catalogue: Any
    pairs: tuple[Any, ...]
    reproduce_extra: tuple[str, ...]


def library() -> Any:
    from conformance.library import find_library

    return find_library()


def scenario_folder(options: RunOptions) -> Path:
    return options.scenarios if options.scenarios is not None else library().scenarios


def select_scenarios(options: RunOptions, *, catalogue: Any) -> list[Any]:
    """The scenarios of the folder that the options select (with every requirement id checked)."""
    from conformance.scenario.loader import load_all

    folder = scenario_folder(options)
    if not folder.is_dir():
        raise UsageError(f"scenario folder {folder} does not exist")
    scenarios = load_all(folder, patterns=list(options.scenario))
    chosen = selection(options, catalogue=catalogue, folders={s.id.split("/", 1)[0] for s in scenarios})
    return [s for s in scenarios if chosen.selects(s)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """Which scenarios the selection options choose, as one predicate (the CLI filters what it loaded,
    the pytest path what it collected)."""

    globs: tuple[str, ...] = ()
    requirements: frozenset[str] = frozenset()
    areas: frozenset[str] = frozenset()
    of_areas: frozenset[str] = frozenset()  # the requirement ids of those areas
    failed: frozenset[str] | None = None  # --last-failed: the scenarios that failed last time

    def names(self, scenario_id: str) -> bool:
        """Whether the --scenario globs take this id: known before its file is read (`discover`'s test)."""
        from fnmatch import fnmatch

        return not self.globs or any(fnmatch(scenario_id, g) for g in self.globs)

    def selects(self, scenario: Any) -> bool:
        if not self.names(scenario.id):
            return False
        if self.requirements and not self.requirements & set(scenario.requirements):
            return False
        if self.areas and not (scenario.id.split("/", 1)[0] in self.areas or self.of_areas & set(scenario.requirements)):
            return False
        return self.failed is None or scenario.id in self.failed


def selection(options: RunOptions, *, catalogue: Any, folders: Any = ()) -> Selection:
    """The options' selection, checked: an unknown requirement or area is an error naming the known ones."""
    check_requirements(options, catalogue=catalogue)
    if options.area:
        areas = {r.area for r in catalogue} | set(folders)
        unknown = [a for a in options.area if a not in areas]
        if unknown:
            raise UsageError("; ".join(f"unknown area {a!r}{did_you_mean(a, areas)}" for a in unknown)
                             + f"; known: {', '.join(sorted(areas))}")
    failed = frozenset(last_failed(options.reports or library().reports)) if options.last_failed else None
    return Selection(globs=options.scenario, requirements=frozenset(options.requirement),
                     areas=frozenset(options.area),
                     of_areas=frozenset(r.id for r in catalogue if r.area in options.area), failed=failed)


def did_you_mean(word: str, choices: Any) -> str:
    import difflib

    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def last_failed(reports: Path) -> set[str]:
    """The scenarios that failed or errored in the run whose events are in `reports`."""
    from conformance.events import ScenarioFinished
    from conformance.reporting import read_events

    path = reports / "events.jsonl"
    if not path.is_file():
        raise UsageError(f"--last-failed: no earlier run in {reports} (no events.jsonl); run without it first, "
                         "or give that run's --reports")
    return {e.scenario for e in read_events(path)
            if isinstance(e, ScenarioFinished) and e.outcome in (Outcome.FAILED, Outcome.ERROR)}


def check_requirements(options: RunOptions, *, catalogue: Any) -> None:
    unknown = [r for r in options.requirement if r not in catalogue]
    if unknown:
        ids = [q.id for q in catalogue]
        raise UsageError(f"unknown requirement(s) {', '.join(f'{r}{did_you_mean(r, ids)}' for r in unknown)}; "
                         "see `conformance list --requirements`")


def coverage_problems(scenarios: Sequence[Any], catalogue: Any) -> list[str]:
    out = []
    for s in scenarios:
        for r in s.requirements:
            if r not in catalogue:
                out.append(f"{s.requirements_span or s.source}: requirement {r!r} is not in "
                           f"conformance/requirements.yaml{did_you_mean(r, [q.id for q in catalogue])}")
    return out


def build_pairs(options: RunOptions, *, scenarios: Sequence[Any] = (), required: Sequence[str] = ()) -> list[Any]:
    """The pairs of the run, after checking the declarations; a target that is not installed stops it here.
    A declared capability may be one the scenarios (or `required`, their capabilities) require."""
    from conformance.targets.preflight import not_installed
    from conformance.targets.registry import DEFAULT_TARGETS, declare, load_targets, parse_gap
    from conformance.targets.template import SIDECAR_CAPABILITIES, WORKER_CAPABILITIES, unknown_capabilities

    if (options.capability or options.gap) and all(w == "reference" for w in options.worker or ["reference"]):
        raise UsageError("--capability and --gap declare the worker under test; add --worker NAME "
                         "(e.g. --worker command --worker-command '...')")
    if (options.sidecar_capability or options.sidecar_gap) and all(
            s == "reference" for s in options.sidecar or ["reference"]):
        raise UsageError("--sidecar-capability and --sidecar-gap declare the sidecar under test; add --sidecar NAME")
    known = {*WORKER_CAPABILITIES, *SIDECAR_CAPABILITIES, *required, *(r for s in scenarios for r in s.requires)}
    problems = unknown_capabilities([*options.capability, *options.sidecar_capability], known=known)
    if problems:
        raise UsageError("\n".join(problems))
    targets = declare(load_targets(DEFAULT_TARGETS, extra=list(options.targets)),
                      worker_capabilities=list(options.capability),
                      worker_gaps=[parse_gap(g) for g in options.gap],
                      sidecar_capabilities=list(options.sidecar_capability),
                      sidecar_gaps=[parse_gap(g) for g in options.sidecar_gap])
    checkout = prepare_checkout(options, targets=targets) if options.sdk_path is not None else None
    if checkout is not None:
        options = replace(options, worker=(checkout.checkout.worker,), worker_command=checkout.command)
    release = prepare_release(options, targets=targets) if options.sdk_version is not None else None
    if release is not None:
        options = replace(options, worker_command=release.worker_command(targets.workers[options.worker[0]].command))
    commands = [w for w in dict.fromkeys(options.worker)
                if w in targets.workers and targets.workers[w].kind == "command"]
    if options.worker_command and len(commands) > 1:
        raise UsageError(f"--worker-command would replace the command of {len(commands)} workers "
                         f"({', '.join(commands)}); run them one at a time")
    # A name given twice is one pair (`./dev sdk NAME` and a pasted reproduce line both name the worker).
    pairs = [targets.pair(s, w, sidecar_address=options.sidecar_address, worker_command=options.worker_command)
             for s in dict.fromkeys(options.sidecar or ["reference"])
             for w in dict.fromkeys(options.worker or ["reference"])]
    settings = engine_settings(options)
    if settings.asked():
        cannot = sorted({f"sidecar {p.sidecar.name} cannot be started with engine setting {s.value} (it lacks "
                         f"the capability {s.capability}; conformance/targets/targets.yaml)"
                         for p in pairs for s in settings.needed() if s.capability not in p.sidecar.capabilities})
        if cannot:
            raise UsageError("; ".join(cannot) + "; drop that --engine-setting or choose another --sidecar")
        pairs = [replace(p, sidecar=replace(p.sidecar, engine=settings)) for p in pairs]
    if checkout is not None:  # failures name the checkout and environment that produced them
        pairs = [replace(p, worker=replace(p.worker, provenance=checkout.describe())) for p in pairs]
    if release is not None:  # the release runs, and failures say which and where its environment is
        pairs = [replace(p, worker=release_worker(p.worker, release, declared=targets.workers[p.worker.name]))
                 for p in pairs]
    missing = not_installed(pairs, root=library().root)
    if missing:  # every scenario would fail the same way: say it once, before any runs
        raise InputError(missing, subject="the targets of this run")
    return pairs


def engine_settings(options: RunOptions) -> Any:
    """--engine-setting, read as a scenario's `engine:` is (conformance/scenario/engine.py)."""
    from taskhub_programs.language import parse_duration

    from conformance.scenario.engine import parse_cli_settings

    try:
        return parse_cli_settings(options.engine_setting, duration=parse_duration)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def prepare_checkout(options: RunOptions, *, targets: Any) -> Any:
    """--sdk-path: the checkout's SDK and worker, its environment made or brought up to date
    (conformance/targets/checkout.py)."""
    import sys

    from conformance.targets.checkout import detect
    from conformance.targets.checkout_build import prepare

    assert options.sdk_path is not None
    if options.worker_command:
        raise UsageError("--sdk-path and --worker-command both replace the worker's command; give one of them")
    workers = list(dict.fromkeys(options.worker))
    if len(workers) > 1:
        raise UsageError(f"--sdk-path is the SDK of one worker; --worker names {len(workers)} ({', '.join(workers)})")
    checkout = detect(options.sdk_path, worker=workers[0] if workers else None)
    print(f"preparing {checkout.worker} from {checkout.root} ...", file=sys.stderr, flush=True)
    prepared = prepare(checkout, command=targets.workers[checkout.worker].command, root=library().root)
    print(prepared.describe(), file=sys.stderr, flush=True)
    return prepared


def prepare_release(options: RunOptions, *, targets: Any) -> Any:
    """--sdk-version: the release's environment, made once in the user cache (conformance/versions/envs.py)."""
    import sys

    from conformance.versions.catalogue import load_releases
    from conformance.versions.envs import ensure

    assert options.sdk_version is not None
    if options.worker_command or options.sdk_path is not None:
        raise UsageError("--sdk-version, --sdk-path and --worker-command each replace the worker's SDK; give one of them")
    workers = list(dict.fromkeys(options.worker))
    if len(workers) != 1 or workers[0] not in targets.workers or targets.workers[workers[0]].kind != "command":
        raise UsageError("--sdk-version is a release of one SDK worker: give one --worker NAME, e.g. "
                         "--worker dapr-ext-workflow --sdk-version 1.16.3")
    release = load_releases().for_worker(workers[0], options.sdk_version)
    env = ensure(release, root=library().root, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"{release.label}: {'cached' if env.reused else 'made'} environment {env.path}", file=sys.stderr, flush=True)
    return env


def release_worker(worker: Any, env: Any, *, declared: Any) -> Any:
    """The worker target on a release's cached environment: named by its version, and probed there
    (the declared probe on the environment, also where the command's driver file moved with it)."""
    from conformance.targets.probe import probed

    worker = replace(worker, version=env.release.version, provenance=f"{env.release.label} from {env.path}")
    if declared.probe:
        worker = probed(replace(worker, probe=env.worker_command(declared.probe)), root=library().root)
    return worker


def prepare_run(options: RunOptions) -> PreparedRun:
    """Check the options, load the selected scenarios and build the pairs (the CLI's path)."""
    from conformance.reporting.catalogue import load_catalogue

    catalogue = load_catalogue(CATALOGUE)
    scenarios = select_scenarios(options, catalogue=catalogue)
    problems = coverage_problems(scenarios, catalogue)
    if problems:
        raise InputError(problems, subject="scenario files")
    if not scenarios and not options.last_failed:
        raise UsageError("no scenario matches the selection")
    pairs = build_pairs(options, scenarios=scenarios)
    return PreparedRun(scenarios=tuple(scenarios), catalogue=catalogue, pairs=tuple(pairs),
                       reproduce_extra=tuple(reproduce_options(options)))


CATALOGUE = Path(__file__).with_name("requirements.yaml")


def reproduce_options(options: RunOptions) -> list[str]:
    """The options that chose the pair's declarations and the scenarios, for "Reproduce with:"
    (the runner adds the pair and the scenario itself)."""
    out: list[str] = []
    # Absolute paths: the line is pasted from wherever the reader is.
    if options.scenarios is not None and options.scenarios.resolve() != library().scenarios.resolve():
        out += ["--scenarios", str(options.scenarios.resolve())]
    for path in options.targets:
        out += ["--targets", str(path.resolve())]
    if options.sidecar_address:
        out += ["--sidecar-address", options.sidecar_address]
    if options.sdk_path is not None:  # the checkout, whose environment the run made (and the paste reuses)
        out += ["--sdk-path", os.path.abspath(options.sdk_path)]
    if options.sdk_version is not None:  # the release, whose cached environment the paste reuses
        out += ["--sdk-version", options.sdk_version]
    if options.worker_command:
        out += ["--worker-command", options.worker_command]
    for flag, values in (("--engine-setting", options.engine_setting),
                         ("--capability", options.capability), ("--gap", options.gap),
                         ("--sidecar-capability", options.sidecar_capability),
                         ("--sidecar-gap", options.sidecar_gap)):
        for value in values:
            out += [flag, value]
    return out


def command_line(argv: Sequence[str]) -> str:
    return shlex.join(["conformance", *argv])
