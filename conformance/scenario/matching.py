"""Matching expected patterns against observed data.

- `"*"` matches anything (in a sequence: any run of items, possibly empty);
- `"re:<regex>"` matches a string (or the JSON text of a value) in full;
- `"${NAME}"` captures the value on first sight and must be equal on every later one;
- a mapping matches a mapping that has at least its keys (extra keys are ignored);
- a list matches a list of the same length, item by item; anything else must be equal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.scenario.placeholders import whole
from conformance.verdict import Diff
from conformance.verdict import MismatchKind as K


@dataclass
class Matcher:
    captures: dict[str, Any] = field(default_factory=dict)

    def match(self, expected: Any, actual: Any, path: str = "$") -> list[str]:
        """Every mismatch, as 'path: expected X, got Y' lines; empty when it matches."""
        return [d.text for d in self.diffs(expected, actual, path)]

    def diffs(self, expected: Any, actual: Any, path: str = "$") -> list[Diff]:
        """Every mismatch as data (path, sort, both values); empty when it matches."""
        if isinstance(expected, str):
            if expected == "*":
                return []
            name = whole(expected)  # `${NAME}` captures
            if name is not None:
                if name not in self.captures:
                    self.captures[name] = actual
                    return []
                if self.captures[name] == actual:
                    return []
                return [_diff(path, K.DIFFERENT, self.captures[name], actual,
                              f"expected ${{{name}}} = {_show(self.captures[name])} (captured earlier), "
                              f"got {_show(actual)}")]
            if expected.startswith("re:"):
                text = actual if isinstance(actual, str) else json.dumps(actual)
                if re.fullmatch(expected[3:], text or "", flags=re.S):
                    return []
                return [_diff(path, K.SHAPE, expected, actual,
                              f"expected a match of /{expected[3:]}/, got {_show(actual)}")]
        if isinstance(expected, Mapping):
            if not isinstance(actual, Mapping):
                return [_diff(path, K.SHAPE, expected, actual,
                              f"expected a mapping {_show(expected)}, got {_show(actual)}")]
            out = []
            for key, value in expected.items():
                where = f"{path}.{key}"
                if value == "!absent":
                    if key in actual:
                        out.append(_diff(where, K.UNEXPECTED, None, actual[key],
                                         f"expected absent, got {_show(actual[key])}"))
                    continue
                if key not in actual:
                    out.append(_diff(where, K.MISSING, value, None, f"missing (expected {_show(value)})"))
                    continue
                out.extend(self.diffs(value, actual[key], where))
            return out
        if isinstance(expected, list):
            if not isinstance(actual, list):
                return [_diff(path, K.SHAPE, expected, actual,
                              f"expected a list {_show(expected)}, got {_show(actual)}")]
            if len(expected) != len(actual):
                return [_diff(path, K.COUNT, len(expected), len(actual),
                              f"expected {len(expected)} items, got {len(actual)}: {_show(actual)}")]
            out = []
            for i, (e, a) in enumerate(zip(expected, actual)):
                out.extend(self.diffs(e, a, f"{path}[{i}]"))
            return out
        if isinstance(expected, bool) or isinstance(actual, bool):
            same = expected is actual  # True must not equal 1
        else:
            same = expected == actual
        return [] if same else [_diff(path, K.DIFFERENT, expected, actual,
                                      f"expected {_show(expected)}, got {_show(actual)}")]


def _diff(path: str, kind: K, expected: Any, got: Any, says: str) -> Diff:
    return Diff(path=path, kind=kind, expected=expected, got=got, text=f"{path}: {says}")


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def event_pattern_matches(m: Matcher, pattern: Any, event: Mapping[str, Any]) -> bool:
    """A history pattern: "Kind", "*", {Kind: {fields}} or {kind: Kind, ...}."""
    if pattern == "*":
        return True
    if isinstance(pattern, str):
        return event.get("kind") == pattern
    if not isinstance(pattern, Mapping):
        return False
    if "kind" in pattern:
        body: Any = pattern
    elif len(pattern) == 1:
        (kind, body), = pattern.items()
        if event.get("kind") != kind:
            return False
    else:
        return False
    trial = Matcher(dict(m.captures))  # captures bind only when the whole pattern matches
    if trial.match(body or {}, event):
        return False
    m.captures.update(trial.captures)
    return True


def event_kind_problem(kind: Any) -> str | None:
    """Why `kind` is not an event kind a history pattern or count can name (None: it is one)."""
    from taskhub_wire.kinds import EVENT_KINDS

    if isinstance(kind, str) and kind in EVENT_KINDS:
        return None
    from conformance.scenario.source import did_you_mean

    return f"{kind!r} is not an event kind{did_you_mean(str(kind), EVENT_KINDS)}; known: {', '.join(EVENT_KINDS)}"


def event_pattern_problem(pattern: Any) -> str | None:
    """Why `pattern` is not a history pattern ("Kind", "*", {Kind: {fields}} or {kind: Kind, ...}); None if it is."""
    if pattern == "*":
        return None
    if isinstance(pattern, Mapping):
        if "kind" in pattern:
            kind = pattern["kind"]
        elif len(pattern) == 1:
            kind = next(iter(pattern))
        else:
            return "a history pattern is Kind, {Kind: {field: value}} or \"*\"; this mapping has several keys"
    else:
        kind = pattern
    why = event_kind_problem(kind)
    return None if why is None else why + "; a pattern is Kind, {Kind: {field: value}} or \"*\""


def contains_in_order(m: Matcher, patterns: Sequence[Any], events: Sequence[Mapping[str, Any]]) -> str | None:
    """Each pattern matched in order, with any events in between; None when it holds, else why not."""
    pos = 0
    for i, pattern in enumerate(patterns):
        if pattern == "*":
            continue
        while pos < len(events) and not event_pattern_matches(m, pattern, events[pos]):
            pos += 1
        if pos == len(events):
            return (f"history pattern #{i} {_show(pattern)} not found in order "
                    f"(after {_show([e['kind'] for e in events[:pos]][-6:])})")
        pos += 1
    return None


def exactly(m: Matcher, patterns: Sequence[Any], events: Sequence[Mapping[str, Any]]) -> str | None:
    """The whole history matches the patterns; "*" matches any run of events."""
    def go(pi: int, ei: int) -> bool:
        if pi == len(patterns):
            return ei == len(events)
        if patterns[pi] == "*":
            return any(go(pi + 1, k) for k in range(ei, len(events) + 1))
        return ei < len(events) and event_pattern_matches(m, patterns[pi], events[ei]) and go(pi + 1, ei + 1)

    if go(0, 0):
        return None
    return f"history {_show([e['kind'] for e in events])} does not match exactly {_show(list(patterns))}"
