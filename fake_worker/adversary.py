"""Deliberate misbehaviour, for testing engines: what the worker sends instead of the right answer.

Rules are selected per run and scripted per task: each rule has a mode and a
match (work item kind, instance id, activity name, task id, and which
occurrence: `nth`, counted per matching rule). Modes:

- zombie: answer a redelivered activity first with the stale token of its earlier dispatch, then correctly
- complete_twice: send the completion twice
- never_complete: send nothing
- disconnect_after_dispatch: break the stream as soon as the item arrives
- crash_after_activity: run the activity, then break the stream without completing it
- wrong_patches: report the patch list given in `patches` (default: none) instead of the true one
- nondeterministic: rename every scheduled activity with a per-answer counter, so no two answers agree
- malformed_action: add an action with no action type
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from taskhub_wire import pb

MODES = ("zombie", "complete_twice", "never_complete", "disconnect_after_dispatch", "crash_after_activity",
         "wrong_patches", "nondeterministic", "malformed_action")
_TURN_ONLY = {"wrong_patches", "nondeterministic", "malformed_action"}
_ACTIVITY_ONLY = {"zombie", "crash_after_activity"}


class AdversaryError(ValueError):
    pass


@dataclass(frozen=True)
class Match:
    kind: str | None = None  # "activity" | "workflow" | None (both)
    instance_id: str | None = None
    name: str | None = None  # activity name (activities only)
    task_id: int | None = None
    nth: int | None = None  # the nth matching item (1-based); None: every one

    def matches(self, item: pb.WorkItem) -> bool:
        if item.HasField("activityRequest"):
            req = item.activityRequest
            return (self.kind in (None, "activity")
                    and self.instance_id in (None, req.workflowInstance.instanceId)
                    and self.name in (None, req.name) and self.task_id in (None, req.taskId))
        req_wf = item.workflowRequest
        return (self.kind in (None, "workflow") and self.name is None and self.task_id is None
                and self.instance_id in (None, req_wf.instanceId))


@dataclass(frozen=True)
class Rule:
    mode: str
    match: Match = Match()
    patches: tuple[str, ...] = ()


@dataclass(frozen=True)
class Send:
    message: Message
    delay: float = 0.0


@dataclass
class Adversary:
    rules: Sequence[Rule] = ()
    _seen: dict[int, int] = field(default_factory=dict)
    _history: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    zombies_sent: list[str] = field(default_factory=list)  # payloads sent with stale tokens
    _answers: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # token (or id of the item itself) -> (modes, the item: kept so its id is not reused meanwhile)
    _decided: dict[str | int, tuple[tuple[str, ...], pb.WorkItem]] = field(default_factory=dict)

    def _modes(self, item: pb.WorkItem) -> tuple[str, ...]:
        """The modes that apply to this work item (decided once per item, counting occurrences)."""
        # daprd sends no completion tokens (its durabletask-go leaves WorkItem.completionToken empty):
        # keyed by an empty token, every item got the first item's decision and no rule ever fired.
        if not self.rules:
            return ()
        key: str | int = item.completionToken or id(item)
        with self._lock:
            if key in self._decided:
                return self._decided[key][0]
            out = []
            for i, rule in enumerate(self.rules):
                if not rule.match.matches(item):
                    continue
                self._seen[i] = self._seen.get(i, 0) + 1
                if rule.match.nth is None or rule.match.nth == self._seen[i]:
                    out.append(rule.mode)
            self._decided[key] = (tuple(out), item)
            return tuple(out)

    def _rule(self, item: pb.WorkItem, mode: str) -> Rule:
        return next(r for r in self.rules if r.mode == mode and r.match.matches(item))

    def seen(self, item: pb.WorkItem) -> None:
        """Remember every activity dispatch's token, even of dispatches never answered."""
        if item.HasField("activityRequest"):
            req = item.activityRequest
            with self._lock:
                self._history.setdefault((req.workflowInstance.instanceId, req.taskId), []).append(
                    item.completionToken)

    def disconnect_after(self, item: pb.WorkItem) -> bool:
        return "disconnect_after_dispatch" in self._modes(item)

    def crash_after_activity(self, item: pb.WorkItem) -> bool:
        return "crash_after_activity" in self._modes(item)

    def activity(self, item: pb.WorkItem, resp: pb.ActivityResponse) -> list[Send]:
        modes = self._modes(item)
        req = item.activityRequest
        key = (req.workflowInstance.instanceId, req.taskId)
        with self._lock:
            tokens = self._history.get(key, [])
            earlier = next((t for t in reversed(tokens) if t != item.completionToken), None)
        if "never_complete" in modes:
            return []
        sends = []
        if "zombie" in modes and earlier is not None:
            stale = pb.ActivityResponse()
            stale.CopyFrom(resp)
            stale.ClearField("failureDetails")
            stale.completionToken = earlier
            stale.result.value = json.dumps("zombie")
            sends.append(Send(stale))
            with self._lock:
                self.zombies_sent.append(stale.result.value)
        sends.append(Send(resp))
        if "complete_twice" in modes:
            sends.append(Send(resp))
        return sends

    def turn(self, item: pb.WorkItem, resp: pb.WorkflowResponse) -> list[Send]:
        modes = self._modes(item)
        if "never_complete" in modes:
            return []
        if "wrong_patches" in modes:
            rule = self._rule(item, "wrong_patches")
            resp.version.ClearField("patches")
            resp.version.patches.extend(rule.patches)
            if not rule.patches and not resp.version.HasField("name"):
                resp.ClearField("version")
        if "nondeterministic" in modes:
            with self._lock:
                self._answers += 1
                n = self._answers
            for action in resp.actions:
                if action.HasField("scheduleTask"):
                    action.scheduleTask.name = f"{action.scheduleTask.name}-{n}"
        if "malformed_action" in modes:
            resp.actions.add(id=max((a.id for a in resp.actions), default=0) + 1)
        sends = [Send(resp)]
        if "complete_twice" in modes:
            sends.append(Send(resp))
        return sends


def parse_rules(doc: Any, *, source: str = "adversary") -> tuple[Rule, ...]:
    """Rules from a list of {mode, match: {...}, patches: [...]}; every problem reported at once."""
    if isinstance(doc, Mapping) and "rules" in doc:
        doc = doc["rules"]
    if not isinstance(doc, list):
        raise AdversaryError(f"{source}: adversary rules are a list of {{mode, match}} mappings")
    problems: list[str] = []
    rules = []
    for i, raw in enumerate(doc):
        where = f"{source}[{i}]"
        if isinstance(raw, str):
            raw = {"mode": raw}
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: a rule is a mapping with 'mode' (and optional 'match', 'patches')")
            continue
        extra = set(raw) - {"mode", "match", "patches"}
        if extra:
            problems.append(f"{where}: unknown keys {sorted(extra)}; allowed: mode, match, patches")
        mode = raw.get("mode")
        if mode not in MODES:
            problems.append(f"{where}.mode: {mode!r} is not a mode; known: {', '.join(MODES)}")
            continue
        m = raw.get("match") or {}
        if not isinstance(m, Mapping) or set(m) - {"kind", "instance_id", "name", "task_id", "nth"}:
            problems.append(f"{where}.match: a mapping with keys kind, instance_id, name, task_id, nth")
            continue
        kind = m.get("kind")
        if kind not in (None, "activity", "workflow"):
            problems.append(f"{where}.match.kind: {kind!r}; use activity or workflow")
        if mode in _TURN_ONLY and kind == "activity" or mode in _ACTIVITY_ONLY and kind == "workflow":
            problems.append(f"{where}: mode {mode} does not apply to {kind} work items")
        rules.append(Rule(mode=mode, match=Match(kind=kind or ("workflow" if mode in _TURN_ONLY else
                                                               "activity" if mode in _ACTIVITY_ONLY else None),
                                                 instance_id=m.get("instance_id"), name=m.get("name"),
                                                 task_id=m.get("task_id"), nth=m.get("nth")),
                          patches=tuple(raw.get("patches") or ())))
    if problems:
        raise AdversaryError("\n".join(problems))
    return tuple(rules)


def load_rules(spec: str) -> tuple[Rule, ...]:
    """`spec` is a JSON/YAML file path or inline JSON."""
    import yaml

    text = spec
    source = "--adversary"
    if not spec.lstrip().startswith(("[", "{")):
        path = Path(spec)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AdversaryError(f"cannot read adversary rules {spec}: {exc.strerror}") from None
        source = spec
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AdversaryError(f"{source}: not valid JSON/YAML: {exc}") from None
    return parse_rules(doc, source=source)
