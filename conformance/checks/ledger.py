"""At-least-once accounting of the `record` activity: the ledger against the history (Jepsen-style).

Each `record` task the history schedules is classified: ok (executed and its result recorded),
lost (its result is in history but no execution was ever recorded, or the workflow completed
without it ever running), duplicated (executed more than once: allowed by at-least-once, counted),
unexpected (an execution for a task the history never scheduled).
"""

from __future__ import annotations

from collections import Counter

from taskhub_wire.kinds import EventKind, Operation

from conformance.checks.base import FlowObservation, check, fail
from conformance.verdict import Mismatch, Subject


def classify(obs: FlowObservation) -> dict[str, int]:
    ids = set(obs.instances.values()) | set(obs.histories)
    runs = Counter((line["instance_id"], int(line["task_id"])) for line in obs.ledger if line["instance_id"] in ids)
    scheduled: set[tuple[str, int]] = set()
    done: set[tuple[str, int]] = set()
    for iid, history in obs.histories.items():
        record_ids = {e["eventId"] for e in history
                      if e["kind"] == EventKind.TASK_SCHEDULED and e.get("name") == "record"}
        scheduled |= {(iid, t) for t in record_ids}
        done |= {(iid, int(e.get("taskScheduledId", 0))) for e in history
                 if EventKind(e["kind"]).resolves is Operation.TASK and int(e.get("taskScheduledId", 0)) in record_ids}
    out = Counter(ok=0, lost=0, duplicated=0, unexpected=0)
    for key in scheduled:
        n = runs.get(key, 0)
        if key in done and n == 0:
            out["lost"] += 1
        elif key in done:
            out["ok"] += 1
        if n > 1:
            out["duplicated"] += 1
    out["unexpected"] = sum(1 for key in runs if key not in scheduled)
    out["executions"] = sum(runs.values())
    return dict(out)


@check("ledger", always=True)
def ledger(obs: FlowObservation) -> None:
    want = obs.scenario.ledger
    if want is None:
        return
    got = classify(obs)
    out = []
    for name in ("ok", "lost", "duplicated", "unexpected", "executions"):
        expected = getattr(want, name)
        if expected is not None and got[name] != expected:
            out.append(Mismatch(text=f"ledger {name}: expected {expected}, got {got[name]} (classification {got})",
                                subject=Subject.LEDGER))
    fail(obs, "ledger", out)
