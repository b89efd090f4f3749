"""Fuzzing speed: turns checked per second as a share of the loopback limit, today's code and the base side by side.

The loopback limit (bench/loopback.py) is the number of serial unary gRPC round trips per second
between two Python processes at the load of the moment; every turn a campaign checks is at least
one such round trip to the SDK's worker, so the share of it is the figure that means the same on
an idle and on a loaded machine. Measured in the same run as the campaigns, before and after each
one (a campaign's share is against the mean of the two), so that the load cancels out.

- campaigns (default): `conformance fuzz --worker W --budget B --seed S` as its own process, with
  this checkout's code and with the base's: `--baseline DIR`, a checkout you made (say of main:
  `git worktree add --detach DIR main`), or `--base REV` (a `git worktree` in a temporary
  directory), the SDKs linked in either way; one after the other. Printed: turns, seconds of search
  (start-up, warm-up and shrinking left out; a base older than issue 24 reports only its whole
  run), turns per second, the loopback limit, the share, and the wall time against the budget;
  the notes carry the harness's CPU per search turn where the campaign reports it.
- `--drivers`: every installed worker target, one turn at a time and 8 at once through the
  reference sidecar, with the CPU time each side spends per turn: the driver process's CPU per
  turn is the SDK's own time per turn (a driver whose SDK alone takes more than a quarter-limit
  turn's time is limited by its SDK, not by the harness).
- `--executor`: the pure executor (making histories, replaying every turn).

    ./dev bench fuzz_rate [--worker NAME ...] [--budget 30s] [--seed 2] [--baseline DIR | --base REV | --no-base]
    ./dev bench fuzz_rate --drivers [--histories N]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loopback import EchoServer, round_trips_per_second  # noqa: E402
from taskhub_programs import parse_bundle  # noqa: E402
from fake_worker.replay import execute  # noqa: E402

from conformance.fuzz import programs as P  # noqa: E402
from conformance.dialects.history import Dialect  # noqa: E402
from conformance.fuzz.interleave import RandomChooser, run_program  # noqa: E402
from conformance.fuzz.workers import process_tree  # noqa: E402
from conformance.targets.registry import load_targets  # noqa: E402

BASE = "1986ecf"  # main before issue 24: one turn waited 10 s twice, drivers restarted in line, shrinking unbounded
SHARED = (".sdk", ".tools", "drivers/durabletask_js/node_modules")  # installed SDKs the base worktree borrows


def histories(bundle, names, n: int, seed: int = 1):
    out = []
    for i in range(n):
        rng = random.Random(seed * 100_000 + i)
        name = names[i % len(names)]
        out.append(run_program(bundle, name, rng.choice([0, 1, "a", None]), RandomChooser(rng),
                               instance_id=f"fz-{i}"))
    return out


def bench_executor(doc, n: int) -> dict:
    bundle = parse_bundle({"programs": doc})
    names = sorted(k for k in doc if k.startswith("p"))
    t0 = time.perf_counter()
    runs = histories(bundle, names, n)
    made = time.perf_counter() - t0
    turns = sum(len(r.cases) for r in runs)
    t0 = time.perf_counter()
    for r in runs:
        for c in r.cases:
            execute(bundle, instance_id=c.instance_id, past=c.past, new=c.new)
    replayed = time.perf_counter() - t0
    return {"histories": n, "turns": turns, "make_s": made, "replay_s": replayed}


def _descendants_cpu_s() -> float:
    """User + system CPU seconds of every process under this one, the live ones read from /proc and the
    ended ones that this process has reaped (os.times): a driver restarted in the middle of a measure (a
    silent turn goes to a fresh process), or a command that is a wrapper around the real driver, counts
    whole."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in process_tree(os.getpid())[1:]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended since the walk: counted below once reaped
        total += (int(fields[11]) + int(fields[12])) / tick
    reaped = os.times()
    return total + reaped.children_user + reaped.children_system


def bench_driver(target, doc, n: int) -> dict:
    """One driver: its start-up, then the same turns one at a time and 8 at once, with the CPU each
    side (this process: the sidecar and the harness; the driver's process: the SDK) spends per turn."""
    from conformance.fuzz.workers import DriverWorker

    bundle = parse_bundle({"programs": doc})
    t0 = time.perf_counter()
    worker = DriverWorker(target, bundle, doc, dialect=Dialect.from_capabilities(target.capabilities))
    started = time.perf_counter() - t0
    row = {"start_s": started, "refused": len(worker.refused)}
    try:
        names = sorted(k for k in worker.bundle_doc if k.startswith("p"))
        cases = [c for r in histories(worker.bundle, names, n) for c in r.cases]
        for c in cases[:20]:  # warm-up: first calls of every code path
            worker.answer(worker.dialect.turn(c))
        for label, conc in (("serial", 1), ("8 at once", 8)):
            cpu0, own0, t0 = _descendants_cpu_s(), os.times(), time.perf_counter()
            with ThreadPoolExecutor(conc) as ex:
                got = list(ex.map(lambda c: worker.answer(worker.dialect.turn(c)), cases))
            took, own1 = time.perf_counter() - t0, os.times()
            row[label] = {"turns": len(cases), "s": took, "silent": sum(g is None for g in got),
                          "sdk_ms": 1000 * (_descendants_cpu_s() - cpu0) / len(cases),
                          "harness_ms": 1000 * ((own1.user + own1.system) - (own0.user + own0.system)) / len(cases)}
    finally:
        worker.close()
    return row


# ---------------------------------------------------------------------- campaigns, side by side


@dataclass(frozen=True)
class CampaignRun:
    code: str  # "this checkout" | "base <rev>"
    turns: int
    seconds: float  # of search where the campaign says so, else of its whole run
    wall: float
    note: str


def base_checkout(rev: str, where: Path) -> Path:
    """A detached worktree of `rev` in `where`, with this checkout's installed SDKs linked in."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True,
                   capture_output=True, text=True)
    return link_sdks(where)


def link_sdks(where: Path) -> Path:
    """`where` with this checkout's installed SDKs linked in where it has none of its own."""
    for rel in SHARED:
        src = (ROOT / rel).resolve()
        if src.exists() and not (where / rel).exists():
            (where / rel).parent.mkdir(parents=True, exist_ok=True)
            (where / rel).symlink_to(src)
    return where


def run_campaign(code_root: Path, label: str, worker: str, budget: str, seed: int) -> CampaignRun:
    env = dict(os.environ, PYTHONPATH=str(code_root))
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "conformance", "fuzz", "--worker", worker, "--budget", budget,
                           "--seed", str(seed), "--no-write", "--no-database", "--no-differential", "-q"],
                          cwd=str(code_root), env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - began
    out = done.stdout + done.stderr
    m = re.search(r"(\d+) turns checked in ([\d.]+)s of search \(\d+/s\)(.*)", out)
    if m:
        return CampaignRun(label, int(m.group(1)), float(m.group(2)), wall, m.group(3).lstrip("; ").strip())
    m = re.search(r"examples in (\d+)s.*?(\d+) turns checked \((\d+)/s\)", out, re.S)
    if m:
        return CampaignRun(label, int(m.group(2)), float(m.group(1)), wall, "whole run (start-up and shrinking in)")
    tail = out.strip().splitlines()[-3:] if out.strip() else [f"exit {done.returncode}"]
    return CampaignRun(label, 0, 0.0, wall, "no figures: " + " | ".join(tail))


def campaigns(workers: list[str], budget: str, seed: int, base: str | None, baseline: Path | None = None) -> None:
    print(f"fuzz campaigns: conformance fuzz --worker W --budget {budget} --seed {seed} (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs); loopback = serial unary gRPC round trips/s between "
          "two Python processes, measured before and after each campaign")
    print(f"  {'worker':<23}{'code':<18}{'turns':>7}{'s':>7}{'turns/s':>9}{'loopback/s':>12}{'share':>8}"
          f"{'wall s':>8}  notes")
    tmp = Path(tempfile.mkdtemp(prefix="fuzz-rate-base-"))
    codes = [("this checkout", ROOT)]
    try:
        if baseline is not None:
            rev = subprocess.run(["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip() or "?"
            codes.append((f"baseline {rev}", link_sdks(baseline)))
        elif base:
            codes.append((f"base {base}", base_checkout(base, tmp / "base")))
        server = EchoServer()
        try:
            loop = round_trips_per_second(server=server)
            for worker in workers:
                for label, code_root in codes:
                    r = run_campaign(code_root, label, worker, budget, seed)
                    after = round_trips_per_second(server=server)
                    limit, loop = (loop + after) / 2, after
                    rate = r.turns / r.seconds if r.seconds else 0.0
                    print(f"  {worker:<23}{label:<18}{r.turns:>7}{r.seconds:>7.1f}{rate:>9.0f}{limit:>12.0f}"
                          f"{100 * rate / limit:>7.1f}%{r.wall:>8.1f}  load {os.getloadavg()[0]:.1f}; {r.note}",
                          flush=True)
        finally:
            server.close()
    finally:
        if base and baseline is None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "base")],
                           capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def drivers(names: list[str], n: int) -> None:
    doc = P.sample_pool(1, 24)
    limit = round_trips_per_second()
    quarter_ms = 1000 / (0.25 * limit)
    print(f"\nSDK drivers through the reference sidecar ({n} histories each; loopback limit {limit:.0f}/s, so a turn "
          f"at a quarter of it takes {quarter_ms:.1f} ms); CPU ms per turn: harness (sidecar), SDK (driver process)")
    print(f"  {'worker':<22}{'start s':>8}{'serial/s':>9}{'8 at once/s':>12}{'harness ms':>11}{'SDK ms':>8}  notes")
    targets = load_targets()
    for name in names:
        target = targets.worker(name)
        try:
            r = bench_driver(target, doc, n)
        except FileNotFoundError as exc:
            print(f"  {name:<22}  skipped: not installed ({exc})")
            continue
        except Exception as exc:  # noqa: BLE001 - one driver failing does not end the benchmark
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"  {name:<22}  skipped: {first[:120]}")
            continue
        one, many = r["serial"], r["8 at once"]
        notes = []
        if many["sdk_ms"] > quarter_ms:
            notes.append(f"limited by its SDK ({many['sdk_ms']:.1f} ms of its own CPU per turn)")
        if r["refused"]:
            notes.append(f"{r['refused']} program(s) it cannot express left out")
        if one["silent"] or many["silent"]:
            notes.append(f"{one['silent'] + many['silent']} turn(s) unanswered")
        print(f"  {name:<22}{r['start_s']:>8.1f}{one['turns'] / one['s']:>9.0f}{many['turns'] / many['s']:>12.0f}"
              f"{many['harness_ms']:>11.2f}{many['sdk_ms']:>8.2f}  {'; '.join(notes)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", action="append", default=[], help="worker targets (default dapr-ext-workflow)")
    ap.add_argument("--budget", default="30s", help="per campaign (default 30s)")
    ap.add_argument("--seed", type=int, default=2,
                    help="campaign seed (default 2; dapr-ext-workflow makes its known stray-resume finding after about 20 s: "
                         "the shrinking is reported apart, not counted as turns)")
    ap.add_argument("--base", default=BASE, help=f"the commit to compare with (default {BASE}, before issue 24)")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="a checkout to compare with (e.g. of main: git worktree add --detach DIR main); "
                         "instead of --base")
    ap.add_argument("--no-base", action="store_true", help="this checkout only")
    ap.add_argument("--drivers", action="store_true", help="every installed driver, one turn at a time and 8 at once")
    ap.add_argument("--histories", type=int, default=40, help="histories per driver with --drivers (default 40)")
    ap.add_argument("--executor", action="store_true", help="the pure executor only")
    args = ap.parse_args(argv)
    logging.getLogger("fake_sidecar").setLevel(logging.ERROR)
    if args.executor:
        doc = P.sample_pool(1, 24)
        row = bench_executor(doc, 400)
        print(f"pure executor: {row['histories']} histories, {row['turns']} turns; making them "
              f"{row['turns'] / row['make_s']:.0f} turns/s, replaying every turn {row['turns'] / row['replay_s']:.0f}/s")
        return 0
    if args.drivers:
        targets = load_targets()
        names = args.worker or [n for n, t in targets.workers.items() if not t.reference and t.starter is not None]
        drivers(names, args.histories)
        return 0
    if args.baseline is not None and not (args.baseline / "conformance" / "__init__.py").is_file():
        ap.error(f"--baseline {args.baseline}: not a checkout of this project (no conformance/__init__.py)")
    campaigns(args.worker or ["dapr-ext-workflow"], args.budget, args.seed, None if args.no_base else args.base,
              None if args.no_base else args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
