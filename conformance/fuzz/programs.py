"""Hypothesis strategies for random programs in the program language (docs/programs.md).

A program is generated as the plain data a bundle file holds (`{"steps": [...]}` or
`{"versions": {...}, "default": ...}`), so it can be written into a scenario, handed to an SDK
driver as JSON and parsed by `taskhub_programs.parse_bundle`. Every generated program loads.

Features follow the worker capabilities of targets.yaml: a target without `patching` gets no
`if_patched`, without `retries` no retry policies, and so on (`Features.from_capabilities`).

Values never contain `$` (operators, `${...}` references), `*`, `:` or `!`, so that a scenario's
expected actions, which are match patterns (`"*"`, `"re:..."`, `"${NAME}"`, `"!absent"`), hold
them literally.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

ACTIVITIES = ("echo", "echo", "echo", "fail", "sleep", "record", "nosuch")
EVENT_NAMES = ("go", "Go", "approve", "x")
PATCHES = ("p1", "p2", "p3")
DURATIONS = (0, "500ms", "1s", "10s", "1m", "1h", "1d")
TIMEOUTS = (0, "5s", "1m", "1h")
SAFE_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 _-.éü中"

# Child programs every pool carries; a call_child names one of them.
CHILDREN: dict[str, Any] = {
    "c_echo": {"steps": [{"call_activity": {"name": "echo", "input": "${input}"}, "as": "r"}, {"return": "${r}"}]},
    "c_fail": {"steps": [{"fail": {"message": "child failed", "type": "ChildError"}}]},
    "c_wait": {"steps": [{"wait_event": {"name": "go", "timeout": "1m", "default": "late"}, "as": "v"},
                         {"return": "${v}"}]},
}


@dataclass(frozen=True)
class Features:
    """What generated programs (and histories) may use; from a worker target's capabilities."""

    patching: bool = True
    versions: bool = True
    retries: bool = True
    children: bool = True
    timers: bool = True
    events: bool = True
    carry_events: bool = True
    suspend: bool = True
    continue_as_new: bool = True
    # Waits without a timeout: the reference reserves an id for a 9999-12-31 timer for each, so a
    # vector about them only runs on workers that do the same (event_wait_timer).
    indefinite_waits: bool = True

    @classmethod
    def from_capabilities(cls, caps: Iterable[str]) -> "Features":
        c = set(caps)
        return cls(patching="patching" in c, versions="versions" in c, retries="retries" in c,
                   children="children" in c, timers="timers" in c, events="events" in c,
                   carry_events="carry_events" in c, suspend="suspend" in c,
                   indefinite_waits="event_wait_timer" in c)

    def capabilities_used(self, doc: Mapping[str, Any]) -> list[str]:
        """The worker capabilities a bundle document needs (a scenario's `requires`)."""
        text = json.dumps(doc)
        need = []
        for cap, marker in (("patching", '"if_patched"'), ("retries", '"retry"'), ("children", '"call_child"'),
                            ("timers", '"timer"'), ("events", '"wait_event"'), ("versions", '"versions"')):
            if marker in text:
                need.append(cap)
        if '"carry_events": true' in text:
            need.append("carry_events")
        return need


ALL_FEATURES = Features()


# ------------------------------------------------------------------------------------ values

safe_text = st.text(alphabet=SAFE_ALPHABET, max_size=6)
_scalars = (st.none() | st.booleans() | st.integers(-50, 1000) | safe_text
            | st.sampled_from([0.5, 2.5, -1.25, 0, "", 1]))
json_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=3)
                           | st.dictionaries(st.text(alphabet="abcxyz_", min_size=1, max_size=4), c, max_size=3),
                           max_leaves=5)
inputs = st.one_of(st.integers(0, 3), st.none(), json_values)


class _Scope:
    def __init__(self) -> None:
        self.vars: list[str] = ["input"]
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        return f"v{self.n}"


def _expr(draw: Any, scope: _Scope, *, simple: bool = False) -> Any:
    kind = draw(st.integers(0, 9))
    var = draw(st.sampled_from(scope.vars))
    if kind <= 4 or simple:
        return draw(json_values) if kind <= 3 or not simple else f"${{{var}}}"
    if kind == 5:
        return f"${{{var}}}"
    if kind == 6:
        return f"n={'${' + var + '}'}"
    if kind == 7:
        return {"$add": [f"${{{var}}}", draw(st.integers(0, 3))]}
    if kind == 8:
        return {"$concat": [f"${{{var}}}", draw(safe_text)]}
    if draw(st.integers(0, 3)) < 3:
        return draw(st.sampled_from([{"$sum": [1, 2]}, {"$not": f"${{{var}}}"}, {"$eq": [f"${{{var}}}", 1]}]))
    return draw(st.sampled_from([{"$len": f"${{{var}}}"}, f"${{{var}.k}}", f"${{{var}.0}}"]))


def _cond(draw: Any, scope: _Scope) -> Any:
    var = draw(st.sampled_from(scope.vars))
    return draw(st.sampled_from([
        {"$lt": ["${input}", draw(st.integers(0, 3))]},
        {"$eq": [f"${{{var}}}", draw(_scalars)]},
        {"$not": f"${{{var}}}"},
        f"${{{var}}}",
        True,
        False,
    ]))


def _retry(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"max_attempts": draw(st.integers(1, 3)),
                           "first_delay": draw(st.sampled_from(["1s", "10s", "1m"]))}
    if draw(st.booleans()):
        out["backoff"] = draw(st.sampled_from([1, 2]))
    if draw(st.integers(0, 3)) == 3:
        out["max_delay"] = "30s"
    return out


def _task(draw: Any, scope: _Scope, f: Features, *, in_group: bool = False) -> dict[str, Any]:
    kinds = ["call_activity", "call_activity"] + (["call_activity"] * 3 if in_group else [])
    if f.children:
        kinds.append("call_child")
    if f.timers:
        kinds.append("timer")
    if f.events:
        kinds += ["wait_event", "wait_event"]
    kind = draw(st.sampled_from(kinds))
    if kind == "call_activity":
        name = draw(st.sampled_from(ACTIVITIES))
        if name == "fail":
            body: dict[str, Any] = {"name": name, "input": draw(st.sampled_from(
                [{"times": 1}, {"times": 2}, 1, {"times": 1, "message": "boom"}, 0]))}
        elif name == "sleep":
            body = {"name": name, "input": 0}
        else:
            body = {"name": name}
            if draw(st.integers(0, 4)):
                body["input"] = _expr(draw, scope)
        if f.retries and draw(st.integers(0, 3)) == 3:
            body["retry"] = _retry(draw)
        return {"call_activity": body}
    if kind == "call_child":
        body = {"workflow": draw(st.sampled_from(sorted(CHILDREN)))}
        if draw(st.booleans()):
            body["input"] = _expr(draw, scope)
        if draw(st.integers(0, 4)) == 4:
            body["instance_id"] = draw(st.sampled_from(["fixed-child", "${instance_id}-c"]))
        if f.retries and draw(st.integers(0, 4)) == 4:
            body["retry"] = _retry(draw)
        return {"call_child": body}
    if kind == "timer":
        return {"timer": draw(st.sampled_from(DURATIONS))}
    name = draw(st.sampled_from(EVENT_NAMES))
    if f.indefinite_waits and not draw(st.integers(0, 2)):
        return {"wait_event": name}
    body = {"name": name}
    if f.timers and (draw(st.booleans()) or not f.indefinite_waits):
        body["timeout"] = draw(st.sampled_from(TIMEOUTS))
    if not in_group and draw(st.booleans()):
        body["default"] = _expr(draw, scope, simple=True)
    return {"wait_event": body}


def _step(draw: Any, scope: _Scope, f: Features, depth: int) -> dict[str, Any]:
    """A step that lets the program go on (terminal steps come last: `_terminal`)."""
    choice = draw(st.integers(0, 17))
    if choice <= 7:
        task = _task(draw, scope, f)
        if draw(st.integers(0, 2)):
            var = scope.fresh()
            task["as"] = var
            scope.vars.append(var)
        return task
    if choice <= 12:  # a fan-out: all/any of a few tasks
        group = [_task(draw, scope, f, in_group=True) for _ in range(draw(st.integers(1, 4)))]
        step: dict[str, Any] = {draw(st.sampled_from(["all", "any"])): group}
        if draw(st.booleans()):
            var = scope.fresh()
            step["as"] = var
            scope.vars.append(var)
        return step
    if choice == 13 and f.patching and depth < 2:
        body: dict[str, Any] = {"patch": draw(st.sampled_from(PATCHES))}
        body["then"] = _steps(draw, scope, f, depth + 1, draw(st.integers(0, 2)))
        if draw(st.booleans()):
            body["else"] = _steps(draw, scope, f, depth + 1, draw(st.integers(0, 2)))
        return {"if_patched": body}
    if choice == 14 and depth < 2:
        body = {"cond": _cond(draw, scope), "then": _steps(draw, scope, f, depth + 1, draw(st.integers(0, 2)))}
        if draw(st.booleans()):
            body["else"] = _steps(draw, scope, f, depth + 1, draw(st.integers(0, 2)))
        return {"if": body}
    if choice == 15:
        var = scope.fresh()
        step = {"set": {"var": var, "value": _expr(draw, scope)}}
        scope.vars.append(var)
        return step
    if choice == 16:
        return {"set_status": _expr(draw, scope)}
    return {"set_status": draw(safe_text)}


def _terminal(draw: Any, scope: _Scope, f: Features) -> dict[str, Any] | None:
    choice = draw(st.integers(0, 9))
    if choice <= 3:
        return None  # run off the end
    if choice <= 6:
        return {"return": _expr(draw, scope)}
    if choice == 7:
        return {"fail": {"message": _expr(draw, scope, simple=True), "type": draw(st.sampled_from(
            ["ProgramFailure", "BusinessError"]))}}
    if not f.continue_as_new:
        return {"return": None}
    body: dict[str, Any] = {"input": draw(st.sampled_from([{"$add": ["${input}", 1]}, "${input}", None, 7]))}
    if f.carry_events and draw(st.booleans()):
        body["carry_events"] = True
    step: dict[str, Any] = {"continue_as_new": body}
    if draw(st.booleans()):  # a counter loop: continue while input < 2
        return {"if": {"cond": {"$lt": ["${input}", 2]}, "then": [step]}}
    return step


def _steps(draw: Any, scope: _Scope, f: Features, depth: int, n: int) -> list[dict[str, Any]]:
    out = [_step(draw, scope, f, depth) for _ in range(n)]
    if depth > 0 and draw(st.integers(0, 3)) < 3:
        return out
    end = _terminal(draw, scope, f)
    return out + ([end] if end is not None else [])


@st.composite
def program_docs(draw: Any, features: Features = ALL_FEATURES) -> dict[str, Any]:
    """One program body: `{"steps": [...]}`, or `{"versions": ..., "default": ...}` with `versions`."""
    if features.versions and draw(st.integers(0, 7)) == 7:
        versions = {}
        for v in ("v1", "v2"):
            versions[v] = {"steps": _steps(draw, _Scope(), features, 0, draw(st.integers(1, 4)))}
        out: dict[str, Any] = {"versions": versions}
        default = draw(st.sampled_from([None, "v1", "v2"]))
        if default is not None:
            out["default"] = default
        return out
    return {"steps": _steps(draw, _Scope(), features, 0, draw(st.integers(1, 6)))}


def bundle_doc(programs: Mapping[str, Any], features: Features = ALL_FEATURES) -> dict[str, Any]:
    """Named programs plus the child programs a call_child may name."""
    out = dict(programs)
    if features.children:
        out.update(CHILDREN)
    return out


def referenced(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Program `name` and the programs it names in call_child (what a scenario about it needs)."""
    out = {name: doc[name]}
    text = json.dumps(doc[name])
    for child in sorted(CHILDREN):
        if child in doc and f'"workflow": "{child}"' in text:
            out[child] = doc[child]
    return out


def digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


_POOLS: dict[tuple[int, int, Features], str] = {}  # pools already drawn in this process, as JSON


def sample_pool(seed: int, n: int, features: Features = ALL_FEATURES) -> dict[str, Any]:
    """`n` distinct random programs named p0..p{n-1}, deterministic in `seed` (plus the children).

    Drawn by Hypothesis itself (a seeded, generate-only run that collects examples), so the pool
    comes from the same strategy the campaigns use; p0 is the simplest program. A pool drawn
    before in this process (drawn ahead, say while an SDK's probe runs) is returned as a fresh copy.
    """
    drawn = _POOLS.get((seed, n, features))
    if drawn is not None:
        return json.loads(drawn)
    drawn = json.dumps(_draw_pool(seed, n, features))
    _POOLS[(seed, n, features)] = drawn
    return json.loads(drawn)  # the same form (JSON values) whether drawn now or before


def _draw_pool(seed: int, n: int, features: Features) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hseed, settings

    found: list[dict[str, Any]] = []
    seen: set[str] = set()

    @hseed(seed)
    @settings(max_examples=max(n * 3, 10), database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False, verbosity=Verbosity.quiet)
    @given(program_docs(features))
    def collect(doc: dict[str, Any]) -> None:
        key = digest(doc)
        if len(found) < n and key not in seen:
            seen.add(key)
            found.append(doc)
        if len(found) >= n:
            # Full: the run ends here instead of drawing the rest of max_examples for nothing (the
            # same draws up to this one, so the same pool; two thirds of the drawing saved).
            raise _PoolFull

    try:
        collect()
    except _PoolFull:
        pass
    return bundle_doc({f"p{i}": d for i, d in enumerate(found)}, features)


class _PoolFull(Exception):
    """Ends `_draw_pool`'s Hypothesis run once the pool has its programs."""
