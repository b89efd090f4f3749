"""`conformance mutate SDK`: the mutation score of the scenario library on an SDK's own executor.

    conformance mutate dapr-ext-workflow --sample 40 --seed 1
    conformance mutate durabletask-dapr --mutant 'durabletask/task.py:123:core/AddNot#4'

Hooked into conformance/cli.py with `add_parser(subparsers)` and `run(args) -> int`.
Exit codes: 0 the campaign ran (whatever its score), 2 bad input (SDK, mutant id, missing tool).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from conformance.mutation.sdks import SDKS

    p = subparsers.add_parser(
        "mutate", help="mutation score of the scenario library on a Python SDK's orchestration executor",
        description="Mutate the installed SDK's orchestration executor (worker.py's replay context and executor, "
                    "task.py) with cosmic-ray in a copy of its environment, run each mutant against the scenarios "
                    "whose coverage reaches the mutated statement, and write reports/mutation/SDK.md and .json "
                    "(docs/mutation.md). Needs the 'mutation' extra: pip install 'taskhub-conformance[mutation]'.")
    p.add_argument("sdk", metavar="SDK", help=f"one of {', '.join(SDKS)}")
    p.add_argument("--sample", type=int, default=None, metavar="N", help="run N mutants drawn with --seed (default all)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--mutant", action="append", default=[], metavar="ID",
                   help="run this mutant (repeatable; ids as the report names them); alone it replaces the sample, "
                        "with --sample it is added to it")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB",
                   help="the scenarios of the line map (repeatable; default the whole library)")
    p.add_argument("--jobs", type=int, default=2, help="scenarios run at once (default 2)")
    p.add_argument("--max-scenarios", type=int, default=24, metavar="K",
                   help="of the scenarios reaching a mutant, run the K fastest at most (default 24)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per mutant: this plus 3x the baseline time of the scenarios it runs (default 60)")
    p.add_argument("--work", type=Path, default=None, metavar="DIR",
                   help="the environment copy and line map (default .mutation/ in the library root)")
    p.add_argument("--rebuild-map", action="store_true", help="run the line map again even if one is there")
    p.add_argument("--resume", type=Path, default=None, metavar="REPORT.json",
                   help="the mutants of a previous report: its killed and timed-out ones are kept, the others run "
                        "again (after scenarios were added; --sample/--mutant are then ignored)")
    p.add_argument("--reports", type=Path, default=None, metavar="DIR",
                   help="report folder (default reports/mutation/ in the library's reports)")
    return p


def run(args: argparse.Namespace) -> int:
    from conformance.library import find_library
    from conformance.mutation.sdks import SDKS

    if args.sdk not in SDKS:
        print(f"conformance mutate: unknown SDK {args.sdk!r}; one of {', '.join(SDKS)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for name, value in (("--sample", args.sample), ("--jobs", args.jobs), ("--max-scenarios", args.max_scenarios)):
        if value is not None and value < 1:
            print(f"conformance mutate: {name} must be at least 1 (got {value})", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        print("conformance mutate: cosmic-ray is not installed; install the extra: "
              "pip install 'taskhub-conformance[mutation]' (./dev setup does)", file=sys.stderr)
        return EXIT_BAD_INPUT
    from conformance.mutation import report
    from conformance.mutation.campaign import Settings, run as run_campaign, score

    library = find_library()
    sample, seed = args.sample, args.seed
    if args.resume is not None and args.sample is None:
        # The previous campaign's mutants run again: its report says how they were drawn (else this one says "all").
        try:
            sample, seed = drawn(args.resume)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"conformance mutate: --resume {args.resume}: not a campaign report ({exc})", file=sys.stderr)
            return EXIT_BAD_INPUT
    settings = Settings(sdk=args.sdk, sample=sample, seed=seed, mutants=tuple(args.mutant),
                        scenario=tuple(args.scenario), jobs=args.jobs, max_scenarios=args.max_scenarios,
                        timeout_s=args.timeout, work=(args.work or library.root / ".mutation").resolve(),
                        rebuild_map=args.rebuild_map, resume=args.resume)
    folder = args.reports or library.reports / "mutation"
    try:
        campaign = run_campaign(settings, root=library.root, progress=lambda c: report.write(c, folder=folder))
    except (ValueError, FileNotFoundError) as exc:
        print(f"conformance mutate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    md, js = report.write(campaign, folder=folder)
    s = score(campaign.outcomes)
    print(f"{args.sdk}: score {s['score']} ({s['counts']}); reports: {md}, {js}")
    return EXIT_OK


def drawn(report: Path) -> tuple[int | None, int]:
    """The sample size and seed a campaign report's mutants were drawn with."""
    import json

    doc = json.loads(report.read_text(encoding="utf-8"))
    sample = doc["sample"]
    if sample is not None and not isinstance(sample, int):
        raise ValueError(f"sample {sample!r} is not a number")
    return sample, int(doc["seed"])
