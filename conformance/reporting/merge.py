"""Several runs' event streams as one: how CI jobs (one per SDK x engine cell) become one matrix.

Each job uploads its events.jsonl; `conformance report --events a --events b ...` merges them.
The merged stream is one run: a RunStarted naming every pair and source run, each run's scenario
events in file order, and a RunFinished with the summed counts. A scenario that two files both
ran on the same pair would make a cell ambiguous, so it is refused with both file names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from conformance.errors import InputError
from conformance.events import Event, RunFinished, RunStarted, ScenarioFinished, ScenarioStarted


class MergeError(InputError):
    """The runs cannot be merged: says which files and which scenario."""


def merge_events(runs: Sequence[Sequence[Event]], *, sources: Sequence[Path]) -> list[Event]:
    """One event stream from `runs` (the events of each file in `sources`, in the same order)."""
    if len(runs) == 1:
        return list(runs[0])
    starts = [e for run in runs for e in run if isinstance(e, RunStarted)]
    finishes = [e for run in runs for e in run if isinstance(e, RunFinished)]
    seen: dict[tuple[str, str], Path] = {}
    body: list[Event] = []
    pairs: list[str] = []
    counts: Counter[str] = Counter()
    twice: list[tuple[str, str, Path, Path]] = []
    for run, source in zip(runs, sources, strict=True):
        for event in run:
            if isinstance(event, RunStarted):
                pairs += [p for p in event.pairs if p not in pairs]
            elif isinstance(event, ScenarioFinished):
                key = (event.scenario, event.pair)
                if key in seen:
                    twice.append((event.scenario, event.pair, source, seen[key]))
                    continue
                seen[key] = source
                counts[event.outcome.value] += 1
                if event.pair not in pairs:
                    pairs.append(event.pair)
                body.append(event)
            elif isinstance(event, ScenarioStarted):
                body.append(event)
    if twice:  # every duplicate, sorted: the message does not depend on the order a run finished its scenarios
        scenario, pair, source, other = min(twice)
        more = f" (and {len(twice) - 1} more)" if len(twice) > 1 else ""
        raise MergeError(f"{source} and {other} both have scenario {scenario} on {pair}{more}; merge runs of "
                         "different pairs or scenarios")
    run_id = "+".join(dict.fromkeys(e.run_id for e in starts if e.run_id)) or "merged"
    started = min((e.started_at for e in starts), default=0.0)
    finished = max((e.finished_at for e in finishes), default=started)
    command = "conformance report " + " ".join(f"--events {s}" for s in sources)
    return [RunStarted(run_id=run_id, started_at=started, pairs=tuple(pairs), scenario_count=len(seen),
                       command=command),
            *body,
            RunFinished(run_id=run_id, finished_at=finished, duration_s=max(0.0, finished - started),
                        counts=dict(counts))]
