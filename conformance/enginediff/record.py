"""What one flow scenario run on one engine shows of each instance, as plain data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.scenario.wire import message_dict

# Reads the harness makes to follow an instance; their answers become status transitions, not calls.
POLLS = frozenset({"GetInstance", "GetInstanceHistory"})


@dataclass(frozen=True, kw_only=True)
class Call:
    """A management call and its answer: status code, message, returned state."""

    rpc: str
    request: dict[str, Any]
    code: str  # "OK" or the gRPC status name
    details: str
    response: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class InstanceRecord:
    history: tuple[dict[str, Any], ...]  # message_dict of each pb.HistoryEvent, in order
    work_items: tuple[dict[str, Any], ...]  # the worker's work items for this instance, in order of receipt
    transitions: tuple[str, ...]  # runtime statuses seen by GetInstance, repeats collapsed


@dataclass(frozen=True, kw_only=True)
class Recording:
    scenario: str
    engine: str
    outcome: str
    names: Mapping[str, str]  # instance id -> the scenario's name for it
    instances: Mapping[str, InstanceRecord] = field(default_factory=dict)  # by instance id
    calls: tuple[Call, ...] = ()


def _status(resp: Any) -> str | None:
    if resp is None or not getattr(resp, "exists", False):
        return "(none)" if resp is not None else None
    from taskhub_wire import pb

    return pb.OrchestrationStatus.Name(resp.workflowState.workflowStatus).removeprefix("ORCHESTRATION_STATUS_")


def _instance_of(message: Mapping[str, Any]) -> str:
    for key in ("workflowRequest", "activityRequest"):
        body = message.get(key)
        if isinstance(body, Mapping):
            inner = body.get("workflowInstance") if key == "activityRequest" else None
            return str(body.get("instanceId") or (inner or {}).get("instanceId") or "")
    return ""


def build(*, scenario: str, engine: str, outcome: str, instances: Mapping[str, str], observed: Any,
          calls: Sequence[tuple[float, str, Any, Any, str | None]], transcript: Sequence[Any]) -> Recording:
    """A Recording from what `run_scenario(capture=...)` hands over."""
    names = {iid: name for name, iid in instances.items()}
    if observed is not None:
        for key, iid in observed.keys.items():
            names.setdefault(iid, key)
    items: dict[str, list[dict[str, Any]]] = {}
    for entry in transcript:
        if entry.direction == "item" and entry.rpc == "GetWorkItems":
            iid = _instance_of(entry.message)
            if iid:
                items.setdefault(iid, []).append(dict(entry.message))
    seen: dict[str, list[str]] = {}
    kept: list[Call] = []
    for _t, rpc, request, resp, error in calls:
        if rpc == "GetInstance":
            status = _status(resp) if error is None else None
            if status is not None:
                trail = seen.setdefault(request.instanceId, [])
                if not trail or trail[-1] != status:
                    trail.append(status)
            continue
        if rpc in POLLS:
            continue
        code, _, details = (error or "OK: ").partition(": ")
        kept.append(Call(rpc=rpc, request=message_dict(request), code=code, details=details,
                         response=message_dict(resp) if resp is not None else {}))
    raw = observed.raw_histories if observed is not None else {}
    ids = dict.fromkeys([*names, *raw, *items])
    out = {iid: InstanceRecord(history=tuple(message_dict(e) for e in raw.get(iid, ())),
                               work_items=tuple(items.get(iid, ())), transitions=tuple(seen.get(iid, ())))
           for iid in ids}
    for iid in out:
        names.setdefault(iid, iid)
    return Recording(scenario=scenario, engine=engine, outcome=outcome, names=names, instances=out,
                     calls=tuple(kept))


def dump(rec: Recording, out: Any) -> None:
    """One JSON line (`conformance engines-diff --recordings`)."""
    import json

    doc = {"scenario": rec.scenario, "engine": rec.engine, "outcome": rec.outcome, "names": dict(rec.names),
           "instances": {iid: {"history": list(i.history), "work_items": list(i.work_items),
                               "transitions": list(i.transitions)} for iid, i in rec.instances.items()},
           "calls": [c.__dict__ for c in rec.calls]}
    out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    out.flush()


def load(path: Any) -> list[Recording]:
    import json

    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(Recording(scenario=d["scenario"], engine=d["engine"], outcome=d["outcome"], names=d["names"],
                                 instances={iid: InstanceRecord(history=tuple(i["history"]),
                                                                work_items=tuple(i["work_items"]),
                                                                transitions=tuple(i["transitions"]))
                                            for iid, i in d["instances"].items()},
                                 calls=tuple(Call(**c) for c in d["calls"])))
    return out

