"""`conformance versions`: the scenario library on several releases of an SDK and of an engine."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "versions", help="the version matrix: SDK releases x engine releases (environments cached per release)",
        description="Run the scenario library for each SDK release on each engine release listed in "
                    "conformance/versions/releases.yaml (or the ones you pick), each release in its own environment "
                    "cached under ~/.cache/taskhub-conformance/<sdk>-<version>. Writes versions.md and versions.json: "
                    "per cell the counts and every MUST broken, and where each FAILED scenario first appears or "
                    "disappears along the releases. Exit 1 when a cell has a FAILED or ERROR scenario or could not run.")
    p.add_argument("--sdk", action="append", default=[], metavar="NAME[@V,V]",
                   help="an SDK line and optionally some of its releases (repeatable), e.g. durabletask-dapr or "
                        "dapr-python@1.19.0,1.18.3; default: every SDK (see --list)")
    p.add_argument("--engine", action="append", default=[], metavar="NAME[@V,V]",
                   help="an engine line and optionally releases (repeatable), e.g. durabletask-go@v0.12.1; "
                        "default: reference")
    p.add_argument("--scenario", action="append", default=[], metavar="GLOB",
                   help="only scenarios whose id matches (repeatable); default: the whole library")
    p.add_argument("--jobs", type=int, default=2, help="scenarios at once in each cell (default 2)")
    p.add_argument("--reports", type=Path, default=None, metavar="DIR",
                   help="report folder (default reports/versions/)")
    p.add_argument("--list", action="store_true", help="print the releases and exit")
    p.add_argument("--record-histories", type=Path, default=None, metavar="DIR",
                   help="also record the corpus: each PASSED flow scenario's terminal histories, filed under "
                        "DIR/<scenario>/<engine>-<version>/<sdk>-<version>/ (the library's corpus is histories/)")


def run_versions(args: argparse.Namespace) -> int:
    from conformance.library import find_library
    from conformance.versions.catalogue import ReleasesError, load_releases
    from conformance.versions.matrix import needs_attention
    from conformance.versions.run import Plan, run_matrix, write_reports
    from conformance.versions.traced import TracedError, load_traced

    root = find_library().root
    try:
        releases = load_releases()
        traces = load_traced()
        if args.list:
            for name, rs in releases.sdks.items():
                print(f"sdk {name}: " + ", ".join(f"{r.version} ({r.worker})" for r in rs))
            for name, es in releases.engines.items():
                print(f"engine {name}: " + ", ".join(e.version for e in es))
            return EXIT_OK
        sdks = tuple(r for s in (args.sdk or list(releases.sdks)) for r in releases.select_sdk(s))
        engines = tuple(e for s in (args.engine or ["reference"]) for e in releases.select_engine(s))
    except (ReleasesError, TracedError) as exc:
        print(f"conformance versions: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.jobs < 1:
        print("conformance versions: --jobs must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    reports = (args.reports or root / "reports" / "versions").resolve()
    reports.mkdir(parents=True, exist_ok=True)
    plan = Plan(sdks=sdks, engines=engines, scenarios=tuple(args.scenario), jobs=args.jobs, reports=reports,
                corpus=args.record_histories.resolve() if args.record_histories else None)
    command = shlex.join(["conformance", "versions", *sys.argv[2:]]) if sys.argv[1:2] == ["versions"] else \
        "conformance versions"
    results = run_matrix(plan, root=root, log=lambda m: print(m, flush=True))
    written = write_reports(results, reports=reports, command=command, traces=traces)
    print((reports / "versions.md").read_text(encoding="utf-8"))
    print("reports: " + ", ".join(str(p) for p in written))
    return EXIT_FAILED if needs_attention(results, traces) else EXIT_OK


def run_corpus_replay(args: argparse.Namespace) -> int:
    """`conformance replay --corpus DIR --sdk NAME@VERSION`."""
    from conformance.library import find_library
    from conformance.versions.catalogue import ReleasesError, load_releases
    from conformance.versions.corpus import groups, judge_replay, render_replay, replay_corpus
    from conformance.versions.envs import EnvError, ensure
    from conformance.versions.explained import ExplainedError, load_explained
    from conformance.versions.run import declared_command

    if args.corpus is None or not args.sdk or "@" not in args.sdk:
        print("conformance replay: --corpus DIR and --sdk NAME@VERSION go together (e.g. --corpus histories "
              "--sdk dapr-python@1.19.0; releases: conformance versions --list)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.corpus.is_dir() or not groups(args.corpus):
        print(f"conformance replay: --corpus {args.corpus}: no recorded histories there (a folder with "
              "<scenario>/bundle.json and *.history.json below it)", file=sys.stderr)
        return EXIT_BAD_INPUT
    root = find_library().root
    try:
        explanations = load_explained(args.corpus)
        releases = (load_releases().one_sdk_release(args.sdk),)
    except (ReleasesError, ExplainedError) as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sdk = None if args.any_sdk else releases[0].sdk
    if not groups(args.corpus, sdk=sdk, scenarios=tuple(args.scenario), recorded=tuple(args.recorded)):
        print(f"conformance replay: --corpus {args.corpus}: no history matches --sdk {args.sdk}"
              + "".join(f" --scenario {g}" for g in args.scenario) + "".join(f" --recorded {g}" for g in args.recorded)
              + " (recordings are folders <scenario>/<engine>-<version>/<sdk>-<version>)", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        env = ensure(releases[0], root=root, log=lambda m: print(m, flush=True))
        command = env.worker_command(declared_command(root, releases[0].worker))
    except EnvError as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    reports = (args.reports or root / "reports" / "corpus-replay" / releases[0].key).resolve()
    reports.mkdir(parents=True, exist_ok=True)
    results = replay_corpus(args.corpus.resolve(), command=command, reports=reports, jobs=args.jobs,
                            sdk=sdk, scenarios=tuple(args.scenario),
                            recorded=tuple(args.recorded),
                            log=(lambda m: None) if args.quiet else (lambda m: print(m, flush=True)))
    judged = judge_replay(results, explanations, sdk=releases[0].sdk, release=releases[0].version)
    text = render_replay(judged, sdk=releases[0].label)
    (reports / "corpus-replay.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"reports: {reports / 'corpus-replay.md'}")
    return EXIT_OK if judged.ok else EXIT_FAILED
