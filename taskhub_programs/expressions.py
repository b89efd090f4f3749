"""Expressions: their canonical form and the one evaluator (docs/programs.md, "Expressions").

An expression as written (any JSON value, with `${...}` references in strings and `$`-operator
mappings) is first turned into its canonical form (`canonical_expr`): one tagged node per value,
the form drivers are handed. `compile_expr` compiles a canonical node once into a function of the
variables, which is how every expression is evaluated: the replay executor compiles each
expression of a program once and runs it on every replay; `evaluate` compiles and runs at once.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from collections.abc import Callable, Mapping
from typing import Any

OPERATORS = ("$add", "$sub", "$lt", "$le", "$eq", "$not", "$len", "$sum", "$concat")
_REF = re.compile(r"\$\{([^}]+)\}")
_INDEX = re.compile(r"-?[0-9]+")

Env = Mapping[str, Any]
Compiled = Callable[[Env], Any]


class ExpressionError(ValueError):
    """An expression that cannot be evaluated on these variables (the workflow fails with ExpressionError)."""


# ---------------------------------------------------------------------------- the canonical form


def canonical_expr(expr: Any) -> dict[str, Any]:
    """The canonical node of an expression as written; pure, never fails.

    Nodes (each a mapping with one tag): {"lit": null | true | false | "text"}, {"int": n},
    {"float": x}, {"list": [node, ...]}, {"map": [[key, node], ...]} (keys in written order),
    {"var": name, "path": ["key" | "index", ...]}, {"text": [node, ...]} (a string with references
    spliced in) and {"op": "add" | "sub" | ..., "arg": node}.
    """
    if isinstance(expr, str):
        if "${" not in expr:
            return {"lit": expr}
        whole = _REF.fullmatch(expr)
        if whole:
            return _reference(whole.group(1))
        parts: list[dict[str, Any]] = []
        at = 0
        for m in _REF.finditer(expr):
            if m.start() > at:
                parts.append({"lit": expr[at:m.start()]})
            parts.append(_reference(m.group(1)))
            at = m.end()
        if not parts:  # "${" without a complete reference: plain text
            return {"lit": expr}
        if at < len(expr):
            parts.append({"lit": expr[at:]})
        return {"text": parts}
    if expr is None or isinstance(expr, bool):
        return {"lit": expr}
    if isinstance(expr, int):
        return {"int": expr}
    if isinstance(expr, float):
        return {"float": expr}
    if isinstance(expr, list):
        return {"list": [canonical_expr(v) for v in expr]}
    if isinstance(expr, Mapping):
        if len(expr) == 1:
            (key, arg), = expr.items()
            if isinstance(key, str) and key in OPERATORS:
                return {"op": key[1:], "arg": canonical_expr(arg)}
        return {"map": [[k, canonical_expr(v)] for k, v in expr.items()]}
    return {"lit": expr}  # not a JSON value (e.g. a YAML date): kept as it is


def _reference(ref: str) -> dict[str, Any]:
    head, *path = ref.strip().split(".")
    return {"var": head, "path": path}


# ---------------------------------------------------------------------------- the evaluator


def evaluate(expr: Any, env: Env) -> Any:
    """The value of an expression as written, on these variables (ExpressionError if it has none)."""
    return compile_expr(expr)(env)


def compile_expr(expr: Any) -> Compiled:
    """An expression as written, compiled once: `compile_expr(e)(env)` is its value on `env`."""
    return compile_node(canonical_expr(expr))


def compile_node(node: Mapping[str, Any]) -> Compiled:
    """A canonical node compiled into a function of the variables."""
    if "lit" in node or "int" in node or "float" in node:
        value = next(iter(node.values()))
        return lambda env: value
    if "var" in node:
        return _compile_reference(node["var"], tuple(node["path"]))
    if "text" in node:
        parts = tuple(compile_node(p) for p in node["text"])
        return lambda env: "".join([text(p(env)) for p in parts])
    if "list" in node:
        return _compile_list(tuple(compile_node(v) for v in node["list"]))
    if "map" in node:
        fields = tuple((k, compile_node(v)) for k, v in node["map"])
        return lambda env: {k: f(env) for k, f in fields}
    if "op" in node:
        op, operand = node["op"], compile_node(node["arg"])
        if op not in _APPLY:
            raise ExpressionError(f"unknown operator ${op}")
        apply = _APPLY[op]
        return lambda env: _applied(op, apply, operand(env))
    raise ExpressionError(f"not an expression node: {json.dumps(node, default=str)[:80]}")


def _compile_list(items: tuple[Compiled, ...]) -> Compiled:
    # Short lists (operator operands) unrolled: a list comprehension costs a call of its own (Python < 3.12).
    if len(items) == 1:
        a, = items
        return lambda env: [a(env)]
    if len(items) == 2:
        a, b = items
        return lambda env: [a(env), b(env)]
    return lambda env: [f(env) for f in items]


def _compile_reference(head: str, path: tuple[str, ...]) -> Compiled:
    written = "${" + ".".join((head, *path)) + "}"
    if path:  # a path: rare, the general lookup
        return lambda env: _lookup(head, path, written, env)

    def variable(env: Env) -> Any:
        if head in env:
            return env[head]
        return _lookup(head, path, written, env)  # raises the unknown-variable error

    return variable


def _lookup(head: str, path: tuple[str, ...], written: str, env: Env) -> Any:
    if head not in env:
        raise ExpressionError(f"unknown variable '{head}' in '{written}'; known: {sorted(env)}")
    value = env[head]
    for part in path:
        if isinstance(value, list) and _INDEX.fullmatch(part) and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            raise ExpressionError(f"'{written}': {part!r} not found in {json.dumps(value)[:80]}")
    return value


# ---------------------------------------------------------------------------- values


def text(value: Any) -> str:
    """A value as text (docs/programs.md "Text"): a string as it is, anything else as JSON the way
    JSON.stringify and Go's encoding/json write it: no spaces, keys sorted by code point, characters
    outside ASCII as themselves, a number in the shortest form that reads back (ECMAScript's
    Number::toString: `2.0` is `2`, `1e21` is `1e+21`, `1e-7` is `1e-7`)."""
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, (int, float)):
        return number_text(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        pairs = sorted((k if isinstance(k, str) else _json(k), v) for k, v in value.items())
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _json(v) for k, v in pairs) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(_json, value)) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # not a JSON value (a YAML date): its string


_EXACT = 2 ** 53


def number_text(x: float) -> str:
    """A number as ECMAScript writes it (numbers are doubles; NaN and the infinities are null)."""
    if isinstance(x, int) and -_EXACT <= x <= _EXACT:
        return str(x)
    try:
        f = float(x)
    except OverflowError:
        return "null"
    if f != f or f in (math.inf, -math.inf):
        return "null"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    _, digits, exponent = Decimal(repr(abs(f))).normalize().as_tuple()
    shown = "".join(map(str, digits))
    k, n = len(shown), exponent + len(shown)  # n: where the decimal point goes
    if 0 < n <= 21:
        out = shown[:n] + "." + shown[n:] if k > n else shown + "0" * (n - k)
    elif -6 < n <= 0:
        out = "0." + "0" * -n + shown
    else:
        out = shown[0] + ("." + shown[1:] if k > 1 else "") + f"e{'+' if n > 0 else '-'}{abs(n - 1)}"
    return "-" + out if f < 0 else out


def truthy(value: Any) -> bool:
    """An `if` condition's and `$not`'s reading: null, false, 0, 0.0, "", [] and {} are false."""
    return bool(value)


def _items(arg: Any) -> Any:
    """What an operator that asks for a list sees: a mapping counts as its keys, sorted."""
    return sorted(arg) if isinstance(arg, Mapping) else arg


def _add(arg: Any) -> Any:
    arg = _items(arg)
    for a in arg:  # a loop, not any(<generator>): $add runs on every replay of a counting program
        if isinstance(a, str):
            return "".join(map(text, arg))
    return sum(arg)


_APPLY: dict[str, Callable[[Any], Any]] = {
    "add": _add,
    "sub": lambda arg: arg[0] - arg[1],
    "lt": lambda arg: arg[0] < arg[1],
    "le": lambda arg: arg[0] <= arg[1],
    "eq": lambda arg: arg[0] == arg[1],
    "not": lambda arg: not truthy(arg),
    "len": len,
    "sum": lambda arg: sum(_items(arg)),
    "concat": lambda arg: "".join(map(text, _items(arg))),
}


def _applied(op: str, apply: Callable[[Any], Any], arg: Any) -> Any:
    try:
        return apply(arg)
    except (TypeError, IndexError, KeyError) as exc:
        raise ExpressionError(f"${op} cannot be applied to {json.dumps(arg)[:80]}: {exc}") from None
