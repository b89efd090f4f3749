"""Replay speed of the pure executor: replays per second on histories of about 10, 100 and 1,000 events.

Workload: a chain of N `echo` activities, run to its end with `simulate` (no I/O). One replay is
`execute()` of the chain's last turn: the whole history before it as `past` and the turn's
[WorkflowStarted, TaskCompleted] as `new`; it answers with the completion. A chain of N activities
gives a history of 3N+2 events. Timed with time.perf_counter over a fixed number of replays in 5
rounds, reporting the best round (the least disturbed by other processes), in this one
single-threaded process (one core). The load average is printed: other work on the machine slows
every number down.

    ./dev bench executor [--quick] [--profile]

--quick runs a tenth of the replays. --profile adds the cProfile hot spots of the ~100-event case.
The goal is at least 5,000 replays/s at ~100 events.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from taskhub_programs import Bundle, parse_bundle  # noqa: E402
from fake_worker.replay import execute  # noqa: E402
from fake_worker.replay.simulate import simulate  # noqa: E402
from taskhub_wire import pb  # noqa: E402

SIZES = ((3, 20_000), (33, 5_000), (333, 500))  # (activities in the chain, replays to time)
GOAL_EVENTS, GOAL_RATE = 101, 5_000


def chain(n: int) -> Bundle:
    steps = [{"call_activity": {"name": "echo", "input": {"$add": ["${x}", 1]} if i else 0}, "as": "x"}
             for i in range(n)]
    return parse_bundle({"programs": {"chain": {"steps": steps + [{"return": "${x}"}]}}})


def last_turn(n: int) -> tuple[Bundle, list[pb.HistoryEvent], list[pb.HistoryEvent]]:
    bundle = chain(n)
    turns = simulate(bundle, "chain", None, instance_id="bench-1")
    last = turns[-1]
    assert last.actions and last.actions[0].HasField("completeWorkflow"), "the chain did not complete"
    assert last.actions[0].completeWorkflow.result.value == str(n - 1)
    return bundle, list(last.past), list(last.new)


def measure(n: int, replays: int, rounds: int = 5) -> dict:
    """Best of `rounds` timings of replays/rounds replays each (the minimum is the least disturbed one)."""
    bundle, past, new = last_turn(n)
    for _ in range(max(1, replays // 20)):  # warm up
        execute(bundle, instance_id="bench-1", past=past, new=new)
    per_round = max(1, replays // rounds)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(per_round):
            execute(bundle, instance_id="bench-1", past=past, new=new)
        best = min(best, (time.perf_counter() - t0) / per_round)
    return {"activities": n, "events": len(past) + len(new), "replays": per_round * rounds, "rate": 1 / best,
            "us": best * 1e6}


def profile(n: int, replays: int, top: int = 15) -> str:
    bundle, past, new = last_turn(n)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(replays):
        execute(bundle, instance_id="bench-1", past=past, new=new)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the replays")
    ap.add_argument("--profile", action="store_true", help="print cProfile hot spots of the ~100-event case")
    args = ap.parse_args(argv)
    scale = 10 if args.quick else 1
    print(f"pure executor replay speed (Python {sys.version.split()[0]}, one thread{', quick' if args.quick else ''}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'events/history':>14} {'activities':>10} {'replays':>8} {'replays/s':>10} {'us/replay':>10}")
    rows = []
    for n, replays in SIZES:
        row = measure(n, max(10, replays // scale))
        rows.append(row)
        print(f"{row['events']:>14} {row['activities']:>10} {row['replays']:>8} {row['rate']:>10.0f} "
              f"{row['us']:>10.1f}")
    goal = next(r for r in rows if r["events"] == GOAL_EVENTS)
    verdict = "met" if goal["rate"] >= GOAL_RATE else "MISSED"
    print(f"goal: >= {GOAL_RATE} replays/s at ~100 events: {verdict} ({goal['rate']:.0f}/s)")
    if args.profile:
        print(profile(33, max(100, 2_000 // scale)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
