"""Differences between two normalised recordings of one scenario, each with both sides."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskhub_wire.kinds import EventKind

_ABSENT = "(absent)"
_TURN = EventKind.WORKFLOW_STARTED.field  # the event that opens a turn


class Aspect(enum.StrEnum):
    OUTCOME = "outcome"
    HISTORY = "history"
    WORK_ITEMS = "work_items"
    TRANSITIONS = "transitions"
    CALLS = "calls"
    INSTANCE = "instance"  # one engine has the instance, the other not


@dataclass(frozen=True, kw_only=True)
class Difference:
    scenario: str
    engine: str
    instance: str  # the scenario's name for it ("" for calls and outcome)
    aspect: Aspect
    path: str  # where in the aspect: "[3].time", "[0].taskScheduled.taskExecutionId", ...
    reference: Any
    other: Any

    @property
    def shape(self) -> str:
        """The path without indices: what kind of difference this is, for grouping and fates."""
        import re

        return re.sub(r"\[\d+\]", "[]", self.path)

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "engine": self.engine, "instance": self.instance,
                "aspect": self.aspect.value, "path": self.path, "reference": self.reference, "other": self.other}


def leaf_diffs(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every place two JSON values differ: (path, a's value, b's value); lists item by item."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for k in dict.fromkeys([*a, *b]):
            out += leaf_diffs(a.get(k, _ABSENT), b.get(k, _ABSENT), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            out += leaf_diffs(a[i] if i < len(a) else _ABSENT, b[i] if i < len(b) else _ABSENT, f"{path}[{i}]")
        return out
    return [] if a == b else [(path, a, b)]


def _kinds(history: Sequence[Mapping[str, Any]]) -> list[str]:
    return [next((k for k in e if k not in ("eventId", "timestamp", "time")), "?") for e in history]


def _made(kinds: Sequence[str]) -> list[str]:
    """The kinds without the turn markers."""
    return [k for k in kinds if k != _TURN]


def _without_turns(history: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in history if _TURN not in e]


def _activities(items: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The activity requests among work items, by task id (their dispatch order is free)."""
    acts = [i["activityRequest"] for i in items if isinstance(i.get("activityRequest"), Mapping)]
    return sorted(acts, key=lambda r: (r.get("taskId", 0), repr(r)))


def compare(scenario: str, engine: str, ref: Mapping[str, Any], other: Mapping[str, Any]) -> list[Difference]:
    """The differences of `other` (on `engine`) from `ref` (the reference engine's recording)."""
    out: list[Difference] = []

    def add(instance: str, aspect: Aspect, path: str, a: Any, b: Any) -> None:
        out.append(Difference(scenario=scenario, engine=engine, instance=instance, aspect=aspect, path=path,
                              reference=a, other=b))

    if ref["outcome"] != other["outcome"]:
        add("", Aspect.OUTCOME, "", ref["outcome"], other["outcome"])
    for name in dict.fromkeys([*ref["instances"], *other["instances"]]):
        a, b = ref["instances"].get(name), other["instances"].get(name)
        if a is None or b is None:
            add(name, Aspect.INSTANCE, "", "recorded" if a else _ABSENT, "recorded" if b else _ABSENT)
            continue
        # A history whose event kinds differ is one difference (both kind lists), not one per shifted event:
        # ".turns" when only the turn boundaries moved (the same events in the same order, WorkflowStarted
        # elsewhere: results batched into turns otherwise, R5.1), ".kinds" when the events themselves differ.
        ka, kb = _kinds(a["history"]), _kinds(b["history"])
        batched = ka != kb and _made(ka) == _made(kb)
        if batched:
            add(name, Aspect.HISTORY, ".turns", ka, kb)
            # The events themselves are still compared, without the turn markers.
            for path, x, y in leaf_diffs(_without_turns(a["history"]), _without_turns(b["history"]), ".made"):
                add(name, Aspect.HISTORY, path, x, y)
        elif ka != kb:
            add(name, Aspect.HISTORY, ".kinds", ka, kb)
        else:
            for path, x, y in leaf_diffs(a["history"], b["history"]):
                add(name, Aspect.HISTORY, path, x, y)
        if batched and _activities(a["work_items"]) == _activities(b["work_items"]):
            # Other turns deliver other past/new events: one difference, what the history's ".turns" shows;
            # the activities dispatched are the same (compared above).
            if a["work_items"] != b["work_items"]:
                add(name, Aspect.WORK_ITEMS, ".turns", len(a["work_items"]), len(b["work_items"]))
        elif len(a["work_items"]) != len(b["work_items"]):
            add(name, Aspect.WORK_ITEMS, ".count", len(a["work_items"]), len(b["work_items"]))
        else:
            for path, x, y in leaf_diffs(a["work_items"], b["work_items"]):
                add(name, Aspect.WORK_ITEMS, path, x, y)
        if a["transitions"] != b["transitions"]:
            # ".seen": the same last status, other statuses on the way (what the polls caught, R1.3);
            # ".last": the instance ended (or was left) in another status.
            same_last = a["transitions"][-1:] == b["transitions"][-1:]
            add(name, Aspect.TRANSITIONS, ".seen" if same_last else ".last", a["transitions"], b["transitions"])
    ra, rb = ref["calls"], other["calls"]
    if [c["rpc"] for c in ra] != [c["rpc"] for c in rb]:
        add("", Aspect.CALLS, ".rpcs", [c["rpc"] for c in ra], [c["rpc"] for c in rb])
    else:
        for path, x, y in leaf_diffs(ra, rb):
            add("", Aspect.CALLS, path, x, y)
    return out
