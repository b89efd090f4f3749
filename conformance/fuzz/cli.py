"""`conformance fuzz`: fuzz a worker (determinism, differential replay) or a sidecar (engine model).

    conformance fuzz --worker dapr-ext-workflow --budget 10m --seed 1
    conformance fuzz --sidecar reference --budget 2m
    conformance fuzz                                   # the reference pair itself, 1 minute each

Hooked into conformance/cli.py with `add_parser(subparsers)` and `run(args) -> int`.
Exit codes: 0 no finding, 1 findings, 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from conformance.fuzz.campaign import CampaignResult, fuzz_command

ROOT = Path(__file__).resolve().parents[2]
EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "fuzz", help="fuzz a worker (determinism, differential replay) or a sidecar (engine model) with Hypothesis",
        description="Fuzz workers and sidecars with Hypothesis. A worker campaign runs random programs on "
                    "random schedules (and mutated histories) and compares every turn's answer with the "
                    "reference worker's, and with its own answer to the same turn; a sidecar campaign drives "
                    "the engine against a model (reference sidecars: the engine core in-process; others: "
                    "generated flow scenarios). Each finding is shrunk and written as a regression scenario "
                    "under scenarios/regressions/ (see docs/fuzzing.md).")
    p.add_argument("--worker", action="append", default=[], metavar="NAME",
                   help="worker target to fuzz (repeatable), e.g. dapr-ext-workflow; 'reference' fuzzes the "
                        "reference executor's determinism")
    p.add_argument("--sidecar", action="append", default=[], metavar="NAME",
                   help="sidecar target to fuzz (repeatable), e.g. reference")
    p.add_argument("--budget", default="1m",
                   help="per campaign: a time (10m, 90s, 1h) or a number of examples (500); default 1m")
    p.add_argument("--seed", type=int, default=0, help="campaign seed (programs, schedules); default 0")
    p.add_argument("--database", type=Path, default=None, metavar="DIR",
                   help="Hypothesis example database, shared by campaigns (default .hypothesis/conformance-fuzz)")
    p.add_argument("--no-database", action="store_true", help="keep no examples between campaigns")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where finding scenarios go (default scenarios/regressions)")
    p.add_argument("--no-write", action="store_true", help="report findings only; write no scenario")
    p.add_argument("--no-verify", action="store_true",
                   help="do not run each written scenario on the worker (it is always checked on the reference pair)")
    p.add_argument("--pool", type=int, default=24, help="programs per round (default 24)")
    p.add_argument("--no-mutations", action="store_true", help="valid histories only")
    p.add_argument("--streams", type=int, default=3,
                   help="worker processes per SDK campaign (default 3): each history is made on one and replayed "
                        "on the others at once (the fresh-process check), no process is started per example")
    p.add_argument("--reports", type=Path, default=None, metavar="DIR",
                   help="where the differential report goes (default reports/): differential.md and .json, the "
                        "differences from the reference worker's answers, never a verdict")
    p.add_argument("--no-differential", action="store_true", help="write no differential report")
    p.add_argument("--targets", type=Path, default=None, help="a targets file that adds to the built-in targets")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run shard I of N of this campaign (same --seed and --database for every shard): each draws "
                        "its own examples and replays what the others saved in the database; writes "
                        "DIR/shards/shard-I-of-N.json for --merge-shards")
    p.add_argument("--merge-shards", type=Path, default=None, metavar="DIR",
                   help="print one report of every shard that ran on database DIR (or a copy of all shards' "
                        "database directories) and exit: 1 if any found something")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines, only the final report")
    return p


def run(args: argparse.Namespace) -> int:
    from conformance.fuzz.common import DEFAULT_DATABASE, Budget, process_began
    from conformance.targets.registry import DEFAULT_TARGETS, TargetError, load_targets

    from conformance.fuzz import shards as S

    if args.merge_shards is not None:
        try:
            merged = S.merge(args.merge_shards)
        except (FileNotFoundError, ValueError) as exc:
            print(f"conformance fuzz: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(merged.text)
        return EXIT_FINDINGS if merged.findings or merged.errors else EXIT_OK
    try:
        shard = S.Shard.parse(args.shard) if args.shard is not None else None
    except ValueError as exc:
        print(f"conformance fuzz: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if shard is not None and args.no_database:
        print("conformance fuzz: --shard shares findings through the example database: drop --no-database",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    args.shard_index = shard.seed_part if shard is not None else 0
    try:
        budget = Budget.parse(args.budget)
    except ValueError as exc:
        print(f"conformance fuzz: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        targets = load_targets(DEFAULT_TARGETS, extra=[args.targets] if args.targets else [])
        workers = _probed_workers(targets, args)
        sidecars = [targets.sidecar(s) for s in args.sidecar]
    except TargetError as exc:
        print(f"conformance fuzz: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not workers and not sidecars:
        workers, sidecars = [targets.worker("reference")], [targets.sidecar("reference")]
    from conformance.library import find_library

    work = find_library().work  # the checkout, or the working directory when installed
    args.out = args.out or work / "scenarios" / "regressions"
    database = None if args.no_database else (args.database or work / DEFAULT_DATABASE)
    if database is not None:
        database.mkdir(parents=True, exist_ok=True)
    if args.streams < 1:
        print(f"conformance fuzz: --streams {args.streams}: give at least 1 worker process", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = None if args.quiet else sys.stdout
    logging.getLogger("fake_sidecar").setLevel(logging.ERROR)
    logging.getLogger("fake_worker").setLevel(logging.ERROR)
    results = []
    for target in workers:
        # The first campaign's budget counts from the process's start (imports, targets, probes).
        began = process_began() if not results else None
        results.append(_worker_campaign(args, target, budget, database, out, began=began))
    for target in sidecars:
        results.append(_sidecar_campaign(args, target, budget, database, out))
    differential = [r.differential for r in results if r.differential is not None]
    if differential and not args.no_differential:
        from conformance.reporting.differential import DifferentialReport

        merged = DifferentialReport()
        for d in differential:
            merged.merge(d)
        md, _js = merged.write(args.reports or ROOT / "reports")
        print(f"differential report (observations, never verdicts): {md} and .json, "
              f"{len(merged.groups)} field/SDK group(s)")
    if shard is not None and database is not None:
        saved = S.save(results, database=database, shard=shard, command=" ".join(["conformance", "fuzz", *sys.argv[2:]]))
        print(f"shard {shard.index} of {shard.count}: written to {saved} (conformance fuzz --merge-shards {database})")
    print(report(results, args))
    if any(r.error for r in results):
        return EXIT_BAD_INPUT if all(r.error for r in results) else EXIT_FINDINGS
    return EXIT_FINDINGS if any(r.findings for r in results) else EXIT_OK


def _probed_workers(targets: Any, args: argparse.Namespace) -> list[Any]:
    """The worker targets, probed (each probe is a process importing its SDK): meanwhile this
    process draws the first campaign's first program pool from the declared capabilities, which
    the campaign then finds drawn when the probe took nothing away (the usual case)."""
    from concurrent.futures import ThreadPoolExecutor

    from conformance.fuzz.programs import Features
    from conformance.fuzz.worker_fuzz import round_pool

    if not args.worker:
        return []
    with ThreadPoolExecutor(max_workers=len(args.worker)) as ex:
        probes = [ex.submit(targets.worker, w) for w in args.worker]
        first = targets.workers.get(args.worker[0])
        if first is not None and not first.reference:
            round_pool(seed=args.seed, rnd=0, size=args.pool, features=Features.from_capabilities(first.capabilities))
        return [f.result() for f in probes]


def _worker_campaign(args: argparse.Namespace, target: Any, budget: Any, database: Path | None, out: Any, *,
                     began: float | None = None) -> CampaignResult:
    from conformance.fuzz import scenario_out
    from conformance.dialects.compare import profile_for
    from conformance.dialects.history import Dialect
    from conformance.fuzz.programs import Features
    from conformance.fuzz.worker_fuzz import WorkerCampaign, known_from
    from conformance.fuzz.self_oracle import SelfOracleCampaign
    from conformance.fuzz.workers import DriverPool, DriverWorker, ReferenceWorker

    result = CampaignResult(label=f"worker {target.name}", kind="worker")
    reference = target.reference
    features = Features.from_capabilities(target.capabilities)
    profile = profile_for(target.name, None if reference else target.capabilities)
    dialect = Dialect() if reference else Dialect.from_capabilities(target.capabilities)
    out_dir = args.out or scenario_out.DEFAULT_OUT
    command = fuzz_command(args, worker=target.name)
    result.notes += list(profile.notes)
    if not dialect.native:
        result.notes.append(f"histories are sent in the target's dialect: {dialect.describe()}")
    if reference:
        result.notes.append("the reference worker against itself: determinism (twice, fresh process) only; "
                            "its findings are bugs of the reference, never written as scenarios")

    def make(bundle: Any, doc: Any) -> Any:
        if reference:
            return ReferenceWorker(bundle)
        # Self-oracle: the SDK's own histories, in its own numbering (no dialect rewriting).
        concurrency = 1 if any(g.requirement == "TOK-ECHO-001" for g in target.gaps) else 8
        return DriverPool(lambda: DriverWorker(target, bundle, doc), streams=args.streams, concurrency=concurrency)

    def on_finding(f: Any) -> None:
        try:
            _write_finding(f)
        except Exception as exc:  # noqa: BLE001 - a finding that cannot be written is still reported
            f.verified = f"not written: {type(exc).__name__}: {exc}"

    def reproduces(f: Any, doc: Any) -> bool:
        """The same turn, on a fresh driver process loaded with `doc`, shows the same difference."""
        from taskhub_programs import parse_bundle

        from conformance.dialects.compare import compare

        w = DriverWorker(target, parse_bundle({"programs": doc}), doc, dialect=dialect)
        try:
            got = w.answer(f.case)
        finally:
            w.close()
        cmp = compare(f.ref, got, mode="kind" if f.case.form == "mutated" else "strict", profile=profile)
        return not cmp.equal and f"{f.kind}: {cmp.signature()}" == f.key

    def _write_finding(f: Any) -> None:
        if args.no_write or reference or f.target == "reference":
            return
        if not f.scenario_ok:
            # A vector states the reference's answer; this kind is about the SDK's own answers
            # (the same turn answered twice differently, a missing token, a hang on a broken history).
            f.verified = "reported, not written as a scenario (a vector cannot state this kind)"
            return
        source = None
        if f.kind in ("differential", "no-answer"):
            reduced = scenario_out.reduce_program(f.bundle_doc, f.workflow, f.case)
            if reduced.get(f.workflow) != f.bundle_doc.get(f.workflow) and reproduces(f, reduced):
                source = reduced
        path, note = scenario_out.write(f, profile=profile, command=command, out_dir=out_dir, source=source)
        f.scenario, f.verified = path, note + ("; program reduced" if source is not None else "")
        if path is not None and not args.no_verify:
            f.verified += f"; on {target.name}: {scenario_out.verify_on(path, target.name)}"
        if out is not None:
            print(f"[fuzz {target.name}]   -> {path or '(no scenario)'}: {f.verified}", file=out, flush=True)

    known = set() if reference else known_from(sorted(out_dir.glob("*.yaml")) if out_dir.is_dir() else [],
                                                target.name)
    if known:
        shown = out_dir.resolve().relative_to(Path.cwd()) if out_dir.resolve().is_relative_to(Path.cwd()) else out_dir
        # A path relative to where the campaign ran: reports are committed, machine paths must not be.
        result.notes.append(f"{len(known)} finding(s) already written for {target.name} in {shown} are not "
                            "reported again")
    common = dict(target=target.name, make_worker=make, features=features, profile=profile, dialect=dialect,
                  seed=args.seed, budget=budget, database=database, pool_size=args.pool,
                  mutations=not args.no_mutations, known=set(known), out=out, on_finding=on_finding,
                  shard=getattr(args, "shard_index", 0), began=began)
    if reference:
        campaign = WorkerCampaign(**common)
    else:
        campaign = SelfOracleCampaign(**common, task_execution_ids="task_execution_id" in target.capabilities)
        result.notes.append(f"self-oracle: the SDK's own answers drive the engine's rules; {args.streams} worker "
                            "process(es), each history replayed on the same one and on another; differences from "
                            "the reference worker go to the differential report")
    began = time.monotonic()
    try:
        result.findings = campaign.run()
    except Exception as exc:  # noqa: BLE001 - e.g. a driver that cannot start: report it, go on
        result.error = f"{type(exc).__name__}: {exc}"
        result.findings = campaign.findings
    result.seconds = time.monotonic() - began
    result.examples = campaign.clock.examples
    result.notes.append(campaign.timeline.describe())
    result.notes.append(campaign.arrival.describe())
    result.differential = getattr(campaign, "differential", None)
    return result


def _sidecar_campaign(args: argparse.Namespace, target: Any, budget: Any, database: Path | None,
                      out: Any) -> CampaignResult:
    if target.kind != "reference":
        from conformance.fuzz.flows import run_flow_campaign

        return run_flow_campaign(args, target, budget, database, out)
    from conformance.targets.reference import Engine

    from conformance.fuzz.engine_machine import EngineCampaign

    result = CampaignResult(label=f"sidecar {target.name} (engine core)", kind="engine")
    result.notes.append("the reference engine core in-process, against the model of engine_machine.py; its "
                        "findings are bugs of the reference engine, saved under the database directory")
    campaign = EngineCampaign(engine_class=Engine, name=target.name, seed=args.seed, budget=budget,
                              database=database, out=None if args.quiet else sys.stdout)
    began = time.monotonic()
    try:
        result.findings = campaign.run()
    except Exception as exc:  # noqa: BLE001
        result.error = f"{type(exc).__name__}: {exc}"
        result.findings = campaign.findings
    result.seconds = time.monotonic() - began
    result.examples = campaign.clock.examples
    if database is not None:
        folder = database / "findings"
        folder.mkdir(parents=True, exist_ok=True)
        for f in result.findings:
            path = folder / f"engine-{target.name}-{f.check}.txt"
            path.write_text(f.render() + f"\n\nReproduce with: {fuzz_command(args, sidecar=target.name)}\n",
                            encoding="utf-8")
            f.saved = path
    return result


def report(results: list[CampaignResult], args: argparse.Namespace) -> str:
    lines = ["", "=" * 100, f"conformance fuzz: {len(results)} campaign(s), seed {args.seed}, budget {args.budget} each"]
    total = 0
    for r in results:
        lines.append("")
        lines.append(f"{r.label}: {r.examples} examples in {r.seconds:.0f}s, {len(r.findings)} finding(s)")
        for n in r.notes:
            lines.append(f"  note: {n}")
        if r.error:
            lines.append(f"  ERROR: {r.error}")
        for i, f in enumerate(r.findings, 1):
            total += 1
            level = f" [{f.level}{' ' + f.requirement if getattr(f, 'requirement', '') else ''}]" \
                if getattr(f, "level", "") else ""
            lines.append(f"  {i}. {f.headline()}{level}" + (" (flaky)" if getattr(f, "flaky", False) else ""))
            if hasattr(f, "comparison"):
                lines.append(f"     example: {f.example}")
                for d in f.comparison.describe(limit=4).splitlines():
                    lines.append(f"     {d}")
                if f.scenario is not None and f.scenario.parent.name == "regressions":
                    lines.append(f"     scenario: {f.scenario.relative_to(ROOT) if f.scenario.is_relative_to(ROOT) else f.scenario}"
                                 f" ({f.verified})")
                    lines.append(f"     Reproduce with: conformance run --worker {f.target} --scenario "
                                 f"regressions/{f.scenario.stem}")
                elif f.scenario is not None:
                    lines.append(f"     vector: {f.scenario} ({f.verified})")
                elif f.verified:
                    lines.append(f"     {f.verified}")
            elif hasattr(f, "steps"):
                lines.append("     steps: " + " ; ".join(f.steps[-12:]))
                if getattr(f, "saved", None) is not None:
                    lines.append(f"     saved: {f.saved}")
            elif hasattr(f, "scenario_path"):
                lines.append(f"     scenario: {f.scenario_path} ({f.verified})")
    lines.append("")
    lines.append(f"{total} finding(s) in all." if total else "No finding.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m conformance.fuzz.cli ...` (the same as `conformance fuzz ...` once hooked in)."""
    parser = argparse.ArgumentParser(prog="conformance")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["fuzz", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
