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
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from conformance.errors import InputError

CATALOGUE = Path(__file__).with_name("requirements.yaml")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(InputError):
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
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)

    def selection(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--scenarios", type=Path, default=None,
                        help="scenario folder (default: the shipped library, see `conformance --version`)")
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
                     help="for --worker command: your worker, with {address} and {programs} placeholders "
                          "(with a declared SDK worker: replaces its command, keeps its capabilities and gaps)")
    declared(run)
    targets_option(run)
    run.add_argument("--reports", type=Path, default=None,
                     help="report folder (default reports/: the checkout's, or in the working directory)")
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
    _add_replay_parsers(sub)
    return p


def _add_replay_parsers(sub: argparse._SubParsersAction) -> None:
    """`capture` and `replay` (conformance/replay/cli.py)."""
    from conformance.replay.cli import add_parsers

    add_parsers(sub)


def targets_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--targets", type=Path, action="append", default=[], metavar="FILE",
                    help="a targets file that adds to the built-in targets (repeatable); see `conformance init-target`")


def declared(sp: argparse.ArgumentParser) -> None:
    """Capabilities and gaps of the targets under test, from the command line (added to every non-reference one)."""
    sp.add_argument("--capability", action="append", default=[], metavar="NAME",
                    help="a capability of the worker under test (repeatable), e.g. ids_from_one; "
                         "the names are listed in conformance/targets/targets.yaml")
    sp.add_argument("--gap", action="append", default=[], metavar="REQ[@GLOB]=REASON",
                    help="a requirement the worker under test is known not to meet (repeatable)")
    sp.add_argument("--sidecar-capability", action="append", default=[], metavar="NAME",
                    help="a capability of the sidecar under test (repeatable), e.g. restart")
    sp.add_argument("--sidecar-gap", action="append", default=[], metavar="REQ[@GLOB]=REASON",
                    help="a requirement the sidecar under test is known not to meet (repeatable)")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"conformance {version('taskhub-conformance')}"
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "conformance (not installed)"


def _library():
    from conformance.library import find_library

    return find_library()


def _targets(args: argparse.Namespace):
    from conformance.targets.registry import DEFAULT_TARGETS, declare, load_targets, parse_gap

    targets = load_targets(DEFAULT_TARGETS, extra=args.targets)
    return declare(targets, worker_capabilities=args.capability, worker_gaps=[parse_gap(g) for g in args.gap],
                   sidecar_capabilities=args.sidecar_capability,
                   sidecar_gaps=[parse_gap(g) for g in args.sidecar_gap])


def _load(args: argparse.Namespace):
    from conformance.reporting.catalogue import load_catalogue
    from conformance.scenario.loader import load_all

    if args.scenarios is None:
        args.scenarios = _library().scenarios
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
    from conformance.targets.template import SIDECAR_CAPABILITIES, WORKER_CAPABILITIES, unknown_capabilities

    scenarios, catalogue = _load(args)
    problems = _coverage_problems(scenarios, catalogue)
    if problems:
        raise InputError(problems, subject="scenario files")
    if not scenarios:
        raise UsageError("no scenario matches the selection")
    if (args.capability or args.gap) and all(w == "reference" for w in args.worker or ["reference"]):
        raise UsageError("--capability and --gap declare the worker under test; add --worker NAME "
                         "(e.g. --worker command --worker-command '...')")
    if (args.sidecar_capability or args.sidecar_gap) and all(s == "reference" for s in args.sidecar or ["reference"]):
        raise UsageError("--sidecar-capability and --sidecar-gap declare the sidecar under test; add --sidecar NAME")
    known = {*WORKER_CAPABILITIES, *SIDECAR_CAPABILITIES, *(r for s in scenarios for r in s.requires)}
    problems = unknown_capabilities([*args.capability, *args.sidecar_capability], known=known)
    if problems:
        raise UsageError("\n".join(problems))
    targets = _targets(args)
    commands = [w for w in dict.fromkeys(args.worker) if w in targets.workers and targets.workers[w].kind == "command"]
    if args.worker_command and len(commands) > 1:
        raise UsageError(f"--worker-command would replace the command of {len(commands)} workers "
                         f"({', '.join(commands)}); run them one at a time")
    # A name given twice is one pair (`./dev sdk NAME` and a pasted reproduce line both name the worker).
    pairs = [targets.pair(s, w, sidecar_address=args.sidecar_address, worker_command=args.worker_command)
             for s in dict.fromkeys(args.sidecar or ["reference"]) for w in dict.fromkeys(args.worker or ["reference"])]
    from conformance.targets.preflight import not_installed

    missing = not_installed(pairs, root=_library().root)
    if missing:  # every scenario would fail the same way: say it once, before any runs
        raise InputError(missing, subject="the targets of this run")
    plan = Plan.build(scenarios, pairs)
    events: list = []
    # Engine, worker and adversary log lines go to each scenario's log file (and with -v to stderr).
    logs = ScenarioLogs(out_dir=None if args.no_reports else (args.reports or _library().reports),
                        verbose_stream=sys.stderr if args.verbose else None)
    terminal = TerminalReporter(sys.stdout, verbose=args.verbose, color=sys.stdout.isatty(), logs=logs.written)
    from conformance.reproduce import Invocation, run_words

    invocation = Invocation(run=run_words(), options=tuple(reproduce_options(args)),
                            reports=None if args.no_reports else (args.reports or _library().reports))
    with logs:
        results = run_plan(plan, sinks=[logs.handle_event, events.append, terminal.handle], jobs=args.jobs,
                           command=shlex.join(["conformance", *sys.argv[1:]]), invocation=invocation)
    if not args.no_reports:
        written = write_reports(events=events, out_dir=args.reports or _library().reports, catalogue=catalogue)
        print("reports: " + ", ".join(str(p) for p in written.values()))
    failing = failing_outcomes(args.fail_on)
    bad = sum(1 for r in results if r.outcome.value in failing)
    return EXIT_FAILED if bad else EXIT_OK


def reproduce_options(args: argparse.Namespace) -> list[str]:
    """The options of `run` that chose the pair's declarations and the scenarios, for "Reproduce with:"
    (the runner adds the pair and the scenario itself)."""
    out: list[str] = []
    # Absolute paths: the line is pasted from wherever the reader is.
    if args.scenarios is not None and args.scenarios.resolve() != _library().scenarios.resolve():
        out += ["--scenarios", str(args.scenarios.resolve())]
    for path in args.targets:
        out += ["--targets", str(path.resolve())]
    if args.sidecar_address:
        out += ["--sidecar-address", args.sidecar_address]
    if args.worker_command:
        out += ["--worker-command", args.worker_command]
    for flag, values in (("--capability", args.capability), ("--gap", args.gap),
                         ("--sidecar-capability", args.sidecar_capability), ("--sidecar-gap", args.sidecar_gap)):
        for value in values:
            out += [flag, value]
    return out


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
    scenarios, catalogue = _load(args)
    problems = _coverage_problems(scenarios, catalogue)
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
            print(f"  {t.name:<20} {t.kind:<16} {', '.join(sorted(t.capabilities)) or '-'}")
            for gap in t.gaps:
                print(f"      gap {gap.requirement}: {gap.reason}")
    return EXIT_OK


def _replay_handlers() -> dict:
    from conformance.replay.cli import run_capture, run_replay

    return {"capture": run_capture, "replay": run_replay}


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
    from conformance.fuzz.cli import run as cmd_fuzz

    handler = {"run": cmd_run, "list": cmd_list, "validate": cmd_validate, "report": cmd_report,
               "targets": cmd_targets, "fuzz": cmd_fuzz, "init-target": cmd_init_target, **_replay_handlers()}[args.command]
    try:
        return handler(args)
    except InputError as exc:  # every kind of bad input: scenarios, catalogue, targets, options, event logs
        print(f"conformance: {exc.render()}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
