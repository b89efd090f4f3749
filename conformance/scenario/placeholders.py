"""`${name}` placeholders in scenario values: the one implementation the loader, runner and checks share.

A scenario writes `${main}` for the id of the instance it started as `main`, and `${NAME}` for a
value a `call` step captured from a response (conformance.scenario.matching). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
PLACEHOLDER = re.compile(r"\$\{(" + NAME + r")\}")
_WHOLE = re.compile(r"\$\{(" + NAME + r")\}\Z")


def whole(text: str) -> str | None:
    """The name when `text` is exactly one placeholder (`"${x}"` -> `"x"`), else None."""
    m = _WHOLE.match(text)
    return m.group(1) if m else None


def has_placeholder(text: str) -> bool:
    return "${" in text


def substitute(value: Any, *, ids: Mapping[str, str], values: Mapping[str, Any] | None = None) -> Any:
    """`value` with every placeholder replaced, recursively through lists and mappings.

    `ids` (instance name -> instance id) win over `values` (captured values). A string that is one
    placeholder of a captured value becomes that value with its type; inside a longer string it is
    its text. An unknown name is left as written, so the mismatch it causes names it.
    """
    values = values or {}
    if isinstance(value, str):
        name = whole(value)
        if name is not None and name in values and name not in ids:
            return values[name]
        known = {**{k: str(v) for k, v in values.items()}, **ids}
        return PLACEHOLDER.sub(lambda m: known.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [substitute(v, ids=ids, values=values) for v in value]
    if isinstance(value, Mapping):
        return {k: substitute(v, ids=ids, values=values) for k, v in value.items()}
    return value
