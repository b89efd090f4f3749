"""`conformance`: run scenarios on target pairs, list and validate them, rebuild reports.

Exit codes: 0 no MUST of the catalogue is broken (warnings, observations, known
failures a target declares and missing capabilities do not fail a run; --fail-on
adds them), 1 a scenario failed or errored, 2 bad input (scenario files, targets,
options).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SCENARIOS = ROOT / "scenarios"
DEFAULT_REPORTS = ROOT / "reports"
CATALOGUE = Path(__file__).with_name("requirements.yaml")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    pass


# --fail-on LEVEL -> the outcomes it adds to FAILED and ERROR, which always fail a run.
FAIL_ON = {"must": (), "should": ("WARNING",), "observation": ("OBSERVATION",), "known": ("KNOWN_FAILURE",)}


def _fail_on(text: str) -> tuple[str, ...]:
    out = []
    for word in (w.strip().lower() for w in text.split(",") if w.strip()):
        if word not in FAIL_ON:
            raise argparse.ArgumentTypeError(f"unknown level {word!r}; one of {', '.join(FAIL_ON)}")
        out += FAIL_ON[word]
    return tuple(out)


def failing_outcomes(fail_on: Sequence[Sequence[str]] = ()) -> frozenset[str]:
    """The outcome values that make a run exit 1."""
    return frozenset({"FAILED", "ERROR", *(o for group in fail_on for o in group)})


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def selection(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--scenarios", type=Path, default=DEFAULT_SCENARIOS, help="scenario folder (default scenarios/)")
        sp.add_argument("--scenario", action="append", default=[], metavar="GLOB",
                        help="only scenarios whose id matches (repeatable), e.g. 'patching/*'")
        sp.add_argument("--requirement", action="append", default=[], metavar="ID",
                        help="only scenarios covering this requirement (repeatable)")

    run = sub.add_parser("run", help="run scenarios on a sidecar/worker pair (default: the reference pair)")
    selection(run)
    run.add_argument("--sidecar", action="append", default=[], metavar="NAME",
                     help="sidecar target from targets.yaml (repeatable; default reference)")
    run.add_argument("--worker", action="append", default=[], metavar="NAME",
                     help="worker target from targets.yaml (repeatable; default reference)")
    run.add_argument("--sidecar-address", metavar="HOST:PORT", help="for --sidecar address: a sidecar you run")
    run.add_argument("--worker-command", metavar="CMD",
                     help="for --worker command: your worker, with {address} and {programs} placeholders")
    run.add_argument("--targets", type=Path, default=None, help="targets file (default conformance/targets/targets.yaml)")
    run.add_argument("--reports", type=Path, default=DEFAULT_REPORTS, help="report folder (default reports/)")
    run.add_argument("--no-reports", action="store_true", help="only the terminal output")
    run.add_argument("--jobs", type=int, default=6, help="scenarios run at once (default 6)")
    run.add_argument("-v", "--verbose", action="store_true", help="one line per scenario")
    run.add_argument("--fail-on", action="append", default=[], metavar="LEVEL", type=_fail_on,
                     help="also fail the run on: should (warnings), observation (differences from the reference), "
                          "known (declared known failures); repeatable or comma-separated. Default: MUST failures "
                          "and errors only")

    lst = sub.add_parser("list", help="list scenarios (or requirements with --requirements)")
    selection(lst)
    lst.add_argument("--requirements", action="store_true", help="list the requirement catalogue with coverage")

    val = sub.add_parser("validate", help="check scenario files and the catalogue; exit 2 on any problem")
    selection(val)
    val.add_argument("--coverage", action="store_true",
                     help="also require every catalogue requirement to be covered (always so for the shipped library)")

    rep = sub.add_parser("report", help="rebuild every report from a run's events.jsonl")
    rep.add_argument("--events", type=Path, default=DEFAULT_REPORTS / "events.jsonl")
    rep.add_argument("--reports", type=Path, default=DEFAULT_REPORTS)

    tg = sub.add_parser("targets", help="list targets with their capabilities and declared gaps")
    tg.add_argument("--targets", type=Path, default=None)

    from conformance.fuzz.cli import add_parser as add_fuzz_parser

    add_fuzz_parser(sub)
    _add_replay_parsers(sub)
    return p


def _add_replay_parsers(sub: argparse._SubParsersAction) -> None:
    """`capture` and `replay` (conformance/replay/cli.py)."""
    from conformance.replay.cli import add_parsers

    add_parsers(sub)


def _load(args: argparse.Namespace):
    from conformance.reporting.catalogue import load_catalogue
    from conformance.scenario.loader import load_all

    if not args.scenarios.is_dir():
        raise UsageError(f"scenario folder {args.scenarios} does not exist")
    scenarios = load_all(args.scenarios, patterns=args.scenario)
    catalogue = load_catalogue(CATALOGUE)
    if args.requirement:
        unknown = [r for r in args.requirement if r not in catalogue]
        if unknown:
            raise UsageError(f"unknown requirement(s) {', '.join(unknown)}; see `conformance list --requirements`")
        scenarios = [s for s in scenarios if set(s.requirements) & set(args.requirement)]
    return scenarios, catalogue


def _coverage_problems(scenarios, catalogue) -> list[str]:
    out = []
    for s in scenarios:
        for r in s.requirements:
            if r not in catalogue:
                out.append(f"{s.requirements_span or s.source}: requirement {r!r} is not in "
                           "conformance/requirements.yaml")
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from conformance.reporting import TerminalReporter, write_reports
    from conformance.reporting.logs import ScenarioLogs
    from conformance.runner import Plan, run_plan
    from conformance.targets.registry import DEFAULT_TARGETS, load_targets

    scenarios, catalogue = _load(args)
    problems = _coverage_problems(scenarios, catalogue)
    if problems:
        raise UsageError("\n".join(problems))
    if not scenarios:
        raise UsageError("no scenario matches the selection")
    targets = load_targets(args.targets or DEFAULT_TARGETS)
    pairs = [targets.pair(s, w, sidecar_address=args.sidecar_address, worker_command=args.worker_command)
             for s in (args.sidecar or ["reference"]) for w in (args.worker or ["reference"])]
    plan = Plan.build(scenarios, pairs)
    events: list = []
    # Engine, worker and adversary log lines go to each scenario's log file (and with -v to stderr).
    logs = ScenarioLogs(out_dir=None if args.no_reports else args.reports,
                        verbose_stream=sys.stderr if args.verbose else None)
    terminal = TerminalReporter(sys.stdout, verbose=args.verbose, color=sys.stdout.isatty(), logs=logs.written)
    extra = []
    if args.sidecar_address:
        extra += ["--sidecar-address", args.sidecar_address]
    if args.worker_command:
        extra += ["--worker-command", args.worker_command]
    with logs:
        results = run_plan(plan, sinks=[logs.handle_event, events.append, terminal.handle], jobs=args.jobs,
                           command=shlex.join(["conformance", *sys.argv[1:]]), reproduce_extra=extra)
    if not args.no_reports:
        written = write_reports(events=events, out_dir=args.reports, catalogue=catalogue)
        print("reports: " + ", ".join(str(p) for p in written.values()))
    failing = failing_outcomes(args.fail_on)
    bad = sum(1 for r in results if r.outcome.value in failing)
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


def _shipped_scenarios() -> Path:
    """The scenario library this package ships (found by conformance.library where there is one)."""
    try:
        from conformance.library import find_library
    except ImportError:
        return DEFAULT_SCENARIOS
    return find_library().scenarios


def cmd_validate(args: argparse.Namespace) -> int:
    scenarios, catalogue = _load(args)
    problems = _coverage_problems(scenarios, catalogue)
    covered = {r for s in scenarios for r in s.requirements}
    # Coverage is a property of the shipped library, not of a user's own folder of scenarios.
    shipped = args.scenarios.resolve() == _shipped_scenarios().resolve()
    if args.coverage or shipped and not args.scenario and not args.requirement:
        # INFO entries are where checks file observations; no scenario needs to name them.
        problems += [f"{CATALOGUE}: requirement {r.id} is covered by no scenario" for r in catalogue
                     if r.id not in covered and r.level != "INFO"]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{len(scenarios)} scenario(s) valid; {len(covered)} of {len(catalogue)} requirements covered")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from conformance.reporting import read_events, write_reports
    from conformance.reporting.catalogue import load_catalogue

    if not args.events.is_file():
        raise UsageError(f"no events file at {args.events}; run `conformance run` first")
    events = read_events(args.events)
    written = write_reports(events=events, out_dir=args.reports, catalogue=load_catalogue(CATALOGUE))
    print("reports: " + ", ".join(str(p) for p in written.values()))
    return EXIT_OK


def cmd_targets(args: argparse.Namespace) -> int:
    from conformance.targets.registry import DEFAULT_TARGETS, load_targets

    targets = load_targets(args.targets or DEFAULT_TARGETS)
    for group, items in (("sidecars", targets.sidecars), ("workers", targets.workers)):
        print(f"{group}:")
        for t in items.values():
            print(f"  {t.name:<20} {t.kind:<16} {', '.join(sorted(t.capabilities)) or '-'}")
            for gap in t.gaps:
                print(f"      gap {gap.requirement}: {gap.reason}")
    return EXIT_OK


def _replay_handlers() -> dict:
    from conformance.replay.cli import run_capture, run_replay

    return {"capture": run_capture, "replay": run_replay}


def main(argv: Sequence[str] | None = None) -> int:
    from conformance.reporting.catalogue import CatalogueError
    from conformance.scenario.loader import ScenarioError
    from conformance.targets.registry import TargetError

    args = _parser().parse_args(argv)
    from conformance.fuzz.cli import run as cmd_fuzz

    handler = {"run": cmd_run, "list": cmd_list, "validate": cmd_validate, "report": cmd_report,
               "targets": cmd_targets, "fuzz": cmd_fuzz, **_replay_handlers()}[args.command]
    try:
        return handler(args)
    except ScenarioError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_BAD_INPUT
    except (UsageError, TargetError, CatalogueError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
