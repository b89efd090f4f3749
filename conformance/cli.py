"""`conformance`: run scenarios on target pairs, list and validate them, rebuild reports.

Exit codes: 0 no MUST of the catalogue is broken (warnings, observations, known
failures a target declares and missing capabilities do not fail a run; --fail-on
adds them), 1 a scenario failed or errored, 2 bad input (scenario files, targets,
options).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from conformance.errors import InputError

from conformance.run_options import (  # noqa: F401  (re-exported: the CLI's names for them)
    CATALOGUE,
    FAIL_ON,
    RunOptions,
    UsageError,
    add_to_argparse,
    failing_outcomes,
    parse_fail_on as _fail_on,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

SELECTION = ("scenarios", "scenario", "requirement", "area")
DECLARATIONS = ("targets", "capability", "gap", "sidecar-capability", "sidecar-gap")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)

    def selection(sp: argparse.ArgumentParser) -> None:
        add_to_argparse(sp, names=SELECTION)

    run = sub.add_parser("run", help="run scenarios on a sidecar/worker pair (default: the reference pair)")
    add_to_argparse(run)  # the same options as the pytest path's --conformance-* (conformance/run_options.py)
    run.add_argument("-v", "--verbose", action="store_true", help="one line per scenario")

    lst = sub.add_parser("list", help="list scenarios (or requirements with --requirements)")
    selection(lst)
    lst.add_argument("--requirements", action="store_true", help="list the requirement catalogue with coverage")

    val = sub.add_parser("validate", help="check scenario files and the catalogue; exit 2 on any problem")
    val.add_argument("paths", nargs="*", type=Path, metavar="DIR|FILE",
                     help="scenario folders and files to check (default: --scenarios, else the shipped library)")
    selection(val)
    val.add_argument("--coverage", action="store_true",
                     help="also require every catalogue requirement to be covered (always so for the shipped library)")

    rep = sub.add_parser("report", help="rebuild every report from one or more runs' events.jsonl (merged)")
    rep.add_argument("--events", type=Path, action="append", default=[], metavar="FILE",
                     help="a run's events.jsonl (repeatable: the runs are merged into one matrix; "
                          "default reports/events.jsonl)")
    rep.add_argument("--reports", type=Path, default=None, help="report folder (default reports/)")

    tg = sub.add_parser("targets", help="list targets with their capabilities and declared gaps")
    targets_option(tg)
    declared(tg)

    it = sub.add_parser("init-target", help="write a starting target file for a new SDK (see docs/sdk-authors.md)")
    it.add_argument("name", help="the worker target's name, e.g. my-sdk")
    it.add_argument("--output", "-o", type=Path, default=None, metavar="FILE", help="default NAME.target.yaml")
    it.add_argument("--command", dest="worker_command", default=None, metavar="CMD",
                    help="the worker's command line, with {address} and {programs} placeholders")
    it.add_argument("--force", action="store_true", help="overwrite an existing file")

    from conformance.fuzz.cli import add_parser as add_fuzz_parser

    add_fuzz_parser(sub)
    from conformance.mutation.cli import add_parser as add_mutate_parser

    add_mutate_parser(sub)
    _add_replay_parsers(sub)
    from conformance.enginediff.cli import add_parser as add_enginediff_parser

    add_enginediff_parser(sub)
    from conformance.arrival.report import add_parser as add_coverage_parser

    add_coverage_parser(sub)
    return p


def _add_replay_parsers(sub: argparse._SubParsersAction) -> None:
    """`capture` and `replay` (conformance/replay/cli.py)."""
    from conformance.replay.cli import add_parsers

    add_parsers(sub)
    from conformance.versions.cli import add_parsers as add_versions_parsers

    add_versions_parsers(sub)


def targets_option(sp: argparse.ArgumentParser) -> None:
    add_to_argparse(sp, names=("targets",))


def declared(sp: argparse.ArgumentParser) -> None:
    """Capabilities and gaps of the targets under test, from the command line (added to every non-reference one)."""
    add_to_argparse(sp, names=DECLARATIONS[1:])


def _version() -> str:
    """The version, and where the scenario library, drivers and install scripts are (conformance/library.py)."""
    from importlib.metadata import PackageNotFoundError, version

    from conformance.library import LibraryError, find_library

    try:
        head = f"conformance {version('taskhub-conformance')}"
    except PackageNotFoundError:  # run from a checkout that is not installed
        head = "conformance (not installed)"
    try:
        lib = find_library()
        where = (f"library: {lib.root} ({'a checkout' if lib.checkout else 'installed package data'})\n"
                 f"  scenarios: {lib.scenarios}\n  drivers:   {lib.drivers}\n  scripts:   {lib.scripts}\n"
                 f"  reports:   {lib.reports} (default)")
    except LibraryError as exc:
        where = f"library: none found ({exc})"
    return f"{head}\n{where}"


def _library():
    from conformance.library import find_library

    return find_library()


def _options(args: argparse.Namespace) -> RunOptions:
    return RunOptions.read(vars(args).get)


def _targets(args: argparse.Namespace):
    from conformance.targets.registry import DEFAULT_TARGETS, declare, load_targets, parse_gap

    targets = load_targets(DEFAULT_TARGETS, extra=args.targets)
    return declare(targets, worker_capabilities=args.capability, worker_gaps=[parse_gap(g) for g in args.gap],
                   sidecar_capabilities=args.sidecar_capability,
                   sidecar_gaps=[parse_gap(g) for g in args.sidecar_gap])


def _load(args: argparse.Namespace):
    from conformance.reporting.catalogue import load_catalogue
    from conformance.run_options import scenario_folder, select_scenarios

    options = _options(args)
    args.scenarios = scenario_folder(options)
    catalogue = load_catalogue(CATALOGUE)
    return select_scenarios(options, catalogue=catalogue), catalogue


def cmd_run(args: argparse.Namespace) -> int:
    from conformance.reporting import TerminalReporter, write_reports
    from conformance.reporting.logs import ScenarioLogs
    from conformance.run_options import DEFAULT_JOBS, JOBS_PER_PROCESS, prepare_run
    from conformance.runner import Plan, run_plan
    from conformance.events import ScenarioFinished
    from conformance.verdict import NOTHING_TO_READ
    from conformance.runner.isolation import shares_engine
    from conformance.runner.processes import ChildRun, default_processes

    options = _options(args)
    for flag, value in (("--jobs", options.jobs), ("--processes", options.processes)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: give 1 or more")
    prepared = prepare_run(options)
    if not prepared.scenarios:  # --last-failed after a run where nothing failed
        print("--last-failed: nothing failed or errored in the last run; nothing to run")
        return EXIT_OK
    plan = Plan.build(prepared.scenarios, prepared.pairs)
    events: list = []
    reports = None if options.no_reports else (options.reports or _library().reports)
    # Engine, worker and adversary log lines go to each scenario's log file (and with -v to stderr).
    logs = ScenarioLogs(out_dir=reports, verbose_stream=sys.stderr if args.verbose else None)
    terminal = TerminalReporter(sys.stdout, verbose=args.verbose, color=sys.stdout.isatty(), logs=logs.written)
    from conformance.reproduce import Invocation, run_words

    invocation = Invocation(run=run_words(), options=prepared.reproduce_extra, reports=reports)
    processes = min(options.processes or default_processes(prepared.pairs), len(plan.items))
    if any(shares_engine(p) for p in prepared.pairs):
        # One engine at an address serves every child's workers: a child's work could reach another
        # child's worker, which runs other programs. Such a run stays in one process.
        processes = 1
    # --jobs is the run's scenarios at once, shared out: more at once makes timing-bound scenarios late.
    jobs = options.jobs or (JOBS_PER_PROCESS * processes if all(p.in_process for p in prepared.pairs)
                            else DEFAULT_JOBS)
    # Every scenario's work folder (its targets' logs, ledgers, stores) under one folder of the run, removed
    # at the end when every scenario passed: a failure's message names files in it, so then it is kept.
    work_root = Path(tempfile.mkdtemp(prefix="conformance-run-"))
    children = ChildRun(options=options, invocation=invocation, processes=processes,
                        jobs=-(-jobs // processes), work_root=work_root,
                        logs=reports, verbose=args.verbose,
                        required=tuple(sorted({r for s in prepared.scenarios for r in s.requires}))
                        ) if processes > 1 else None
    from conformance.runner.slots import last_durations

    # Read before this run's reports replace it: the longest scenarios of the last run start first.
    durations = last_durations(reports)
    try:
        from conformance.targets.warm import warm_workers

        # Children keep their own warm drivers (conformance/runner/child.py).
        with logs, warm_workers(prepared.pairs if children is None else (), jobs=jobs,
                                enabled=not options.fresh_workers):
            results = run_plan(plan, sinks=[logs.handle_child_event if children else logs.handle_event,
                                            events.append, terminal.handle], jobs=jobs, children=children,
                               command=shlex.join(["conformance", *sys.argv[1:]]), invocation=invocation,
                               durations=durations, work_root=work_root)
    except KeyboardInterrupt:
        if children is None:
            raise
        # run_in_processes has ended every child by its pid; say so instead of a traceback.
        done = sum(1 for e in events if isinstance(e, ScenarioFinished))
        print(f"\nconformance: interrupted after {done} of {len(plan.items)} scenarios; its {processes} child "
              "processes are ended; no reports written", file=sys.stderr)
        return 130
    if reports is not None:
        written = write_reports(events=events, out_dir=reports, catalogue=prepared.catalogue, failing=options.failing)
        print("reports: " + ", ".join(str(p) for p in written.values()))
    if any(r.outcome not in NOTHING_TO_READ for r in results):
        print(f"work files of this run (targets' logs, stores), named in the messages above: {work_root}",
              file=sys.stderr)
    else:
        shutil.rmtree(work_root, ignore_errors=True)
    bad = sum(1 for r in results if r.outcome in options.failing)
    return EXIT_FAILED if bad else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    scenarios, catalogue = _load(args)
    if args.requirements:
        covered = Counter(r for s in scenarios for r in s.requirements)
        for req in catalogue:
            print(f"{req.id:<24} {req.level:<6} {covered.get(req.id, 0):>3} scenario(s)  {req.title}")
        return EXIT_OK
    for s in scenarios:
        print(f"{s.id:<48} {' '.join(s.requirements)}")
    print(f"{len(scenarios)} scenario(s)")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from conformance.run_options import coverage_problems

    if args.paths:
        return _validate_paths(args)
    scenarios, catalogue = _load(args)
    problems = coverage_problems(scenarios, catalogue)
    covered = {r for s in scenarios for r in s.requirements}
    # Coverage is a property of the shipped library, not of a user's own folder of scenarios.
    shipped = args.scenarios is None or args.scenarios.resolve() == _library().scenarios.resolve()
    if args.coverage or shipped and not args.scenario and not args.requirement:
        # INFO entries are where checks file observations; no scenario needs to name them.
        problems += [f"{CATALOGUE}: requirement {r.id} is covered by no scenario" for r in catalogue
                     if r.id not in covered and r.level != "INFO"]
    if problems:
        raise InputError(problems, subject="scenario files")
    print(f"{len(scenarios)} scenario(s) valid; {len(covered)} of {len(catalogue)} requirements covered")
    return EXIT_OK


def _validate_paths(args: argparse.Namespace) -> int:
    """`validate DIR|FILE...`: every folder and file given, their problems listed together."""
    from conformance.errors import Problem
    from conformance.reporting.catalogue import load_catalogue
    from conformance.run_options import coverage_problems
    from conformance.scenario.loader import load_all, load_scenario

    catalogue = load_catalogue(CATALOGUE)
    scenarios, problems = [], []
    for path in args.paths:
        try:
            if path.is_dir():
                scenarios += load_all(path, patterns=args.scenario)
            elif path.is_file():
                scenarios.append(load_scenario(path, root=path.parent))
            else:
                problems.append(Problem(what="no such file or folder", file=str(path)))
        except InputError as exc:
            problems += exc.problems
    problems += [Problem(what=p) for p in coverage_problems(scenarios, catalogue)]
    if problems:
        raise InputError(problems, subject="scenario files")
    covered = {r for s in scenarios for r in s.requirements}
    print(f"{len(scenarios)} scenario(s) valid; {len(covered)} of {len(catalogue)} requirements covered")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from conformance.reporting import read_events, write_reports
    from conformance.reporting.catalogue import load_catalogue
    from conformance.reporting.merge import merge_events

    reports = args.reports or _library().reports
    files = args.events or [reports / "events.jsonl"]
    for path in files:
        if not path.is_file():
            raise UsageError(f"no events file at {path}; run `conformance run` first (it writes REPORTS/events.jsonl)")
    events = merge_events([read_events(path) for path in files], sources=files)
    written = write_reports(events=events, out_dir=reports, catalogue=load_catalogue(CATALOGUE))
    print("reports: " + ", ".join(str(p) for p in written.values()))
    return EXIT_OK


def cmd_targets(args: argparse.Namespace) -> int:
    targets = _targets(args)
    lib = _library()
    print(f"library: {lib.root} ({'checkout' if lib.checkout else 'installed'}; scripts/ installs the SDK drivers there)")
    for group, items in (("sidecars", targets.sidecars), ("workers", targets.workers)):
        print(f"{group}:")
        for t in items.values():
            print(f"  {t.name:<20} {t.kind:<16} {t.version or '-':<9} {', '.join(sorted(t.capabilities)) or '-'}")
            for gap in t.gaps:
                print(f"      gap {gap.requirement}: {gap.reason}")
    return EXIT_OK


def _replay_handlers() -> dict:
    from conformance.replay.cli import run_capture, run_replay

    from conformance.versions.cli import run_versions

    return {"capture": run_capture, "replay": run_replay, "versions": run_versions}


def cmd_init_target(args: argparse.Namespace) -> int:
    from conformance.targets.template import render_target

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.name):
        raise UsageError(f"target name {args.name!r}: letters, digits, '.', '_' and '-' only, e.g. my-sdk")
    out = args.output or Path(f"{args.name}.target.yaml")
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists; pass --force to overwrite it or --output to write elsewhere")
    out.write_text(render_target(name=args.name, command=args.worker_command), encoding="utf-8")
    print(f"wrote {out}: edit its command and capabilities, then\n"
          f"  conformance run --targets {shlex.quote(str(out))} --worker {shlex.quote(args.name)}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's C core logs transport events (a GOAWAY when a sidecar stops) at INFO to stderr; a run's
    # output is its report, so only its errors are let through unless the caller asks otherwise.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    args = _parser().parse_args(argv)
    from conformance.enginediff.cli import run as cmd_engines_diff
    from conformance.arrival.report import run as cmd_coverage
    from conformance.fuzz.cli import run as cmd_fuzz
    from conformance.mutation.cli import run as cmd_mutate

    handler = {"run": cmd_run, "list": cmd_list, "validate": cmd_validate, "report": cmd_report,
               "targets": cmd_targets, "fuzz": cmd_fuzz, "mutate": cmd_mutate, "init-target": cmd_init_target,
               "engines-diff": cmd_engines_diff, "coverage": cmd_coverage, **_replay_handlers()}[args.command]
    try:
        return handler(args)
    except InputError as exc:  # every kind of bad input: scenarios, catalogue, targets, options, event logs
        print(f"conformance: {exc.render()}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
