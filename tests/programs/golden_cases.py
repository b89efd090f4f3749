"""The inputs of tests/programs/golden/programs.json (regenerate it with
`python -m tests.programs.golden_cases` from the repository root).

Programs that cover every step kind and shorthand, and expressions that cover every node of the
canonical expression language and the edges of its semantics (docs/programs.md, "The canonical
form"): number kinds, key order, text of every kind of value, truthiness, operators on the wrong
kinds of value, missing variables, keys and indexes; and the built-in activities' outcomes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("golden") / "programs.json"

PROGRAMS: dict[str, Any] = {
    "every_step": {"steps": [
        {"call_activity": {"name": "echo", "input": "${input}"}, "as": "a"},
        {"call_activity": {"name": "fail", "input": {"times": 1},
                           "retry": {"max_attempts": 3, "first_delay": "500ms", "backoff": 2, "max_delay": "1m"}}},
        {"call_child": {"workflow": "child", "input": {"$add": ["${a}", 1]}}, "as": "c"},
        {"call_child": {"workflow": "child", "instance_id": "${instance_id}-x",
                        "retry": {"max_attempts": 2, "first_delay": 1}}},
        {"timer": "2s"},
        {"timer": {"duration": 1.5}, "as": "t"},
        {"wait_event": "go", "as": "g"},
        {"wait_event": {"name": "late", "timeout": "1h", "default": None}, "as": "l"},
        {"wait_event": {"name": "strict", "timeout": 0}},
        {"all": [{"call_activity": {"name": "echo", "input": 1}}, {"timer": "1d"}], "as": "xs"},
        {"any": [{"wait_event": "stop"}, {"timer": "10m"}], "as": "first"},
        {"if_patched": {"patch": "p1", "then": [{"set": {"var": "v", "value": 2}}]}},
        {"if": {"cond": {"$lt": ["${a}", 3]}, "then": [{"set_status": "small"}], "else": [{"set_status": {"n": "${a}"}}]}},
        {"if": {"cond": True}},
        {"fail": "boom ${a}"},
        {"fail": {"message": "bad", "type": "BusinessError"}},
        {"continue_as_new": None},
        {"continue_as_new": {"input": {"$sub": ["${input}", 1]}, "carry_events": True}},
        {"return": None},
        {"return": "${xs.0}"},
    ]},
    "child": {"steps": None},
    # `spawn` apart from every_step: a driver without detached_spawn refuses it, naming this path.
    "spawner": {"steps": [
        {"spawn": {"workflow": "child", "input": "${input}"}, "as": "s"},
        {"spawn": {"workflow": "child", "instance_id": "${instance_id}-x"}},
    ]},
    "versioned": {"versions": {"v1": {"steps": [{"return": "one"}]}, "v2": {"steps": [{"return": 2.0}]}}},
    "pinned_default": {"versions": {"b": {"steps": []}, "a": {"steps": [{"return": [1, {"k": "v"}]}]}},
                       "default": "a"},
}

ENV: dict[str, Any] = {
    "input": {"b": 2, "a": [1, 2.0, "x"]}, "instance_id": "wf-1", "xs": [1, 2, 3], "s": "h\u00e9llo",
    "n": 3, "f": 1.5, "t": True, "none": None, "empty": [], "m": {"z": 1, "1": "one", "a": None},
}

EXPRESSIONS: list[Any] = [
    # literals and containers
    None, True, False, 0, -7, 1.0, 2.5, 1e16, 1e-05, "plain", "${unclosed", "${}", "a}b",
    [1, "${n}", [2, "${s}"]], {"a": "${n}", "b": {"c": "${s}"}}, {"b": 1, "a": 2}, {"$add": [1], "other": 2},
    # references
    "${input}", "${ n }", "${input.a.-1}", "${input.a.1}", "${input.a.-4}", "${input.a.3}", "${input.b.x}",
    "${m.1}", "${xs.01}", "${missing}", "${input.zz}", "${none.x}", "${s.0}",
    # text splices
    "n=${xs}", "x${f}y${input.a}", "${s} and ${t} and ${none}", "${m}!", "[${empty}]", "a ${missing} b",
    "v=${n}${n}",
    # operators
    {"$add": [1, 2]}, {"$add": [1, 2.0]}, {"$add": ["a", 1, [1, 2]]}, {"$add": "abc"}, {"$add": []},
    {"$add": [True, True]}, {"$add": [[1], [2]]}, {"$add": [0.1, 0.2]}, {"$add": ["${n}", "${f}"]},
    {"$add": [1, None]}, {"$add": 5},
    {"$sub": [5, 7]}, {"$sub": [5.5, 1]}, {"$sub": [1e16, 1]}, {"$sub": [1]}, {"$sub": ["a", 1]},
    {"$lt": [1, 2]}, {"$lt": [1, "a"]}, {"$lt": [[1, 2], [1, 3]]}, {"$lt": ["B", "a"]}, {"$lt": [None, 3]},
    {"$le": ["b", "a"]}, {"$le": [2, 2.0]},
    {"$eq": [1, 1.0]}, {"$eq": [True, 1]}, {"$eq": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}, {"$eq": ["1", 1]},
    {"$eq": [[1, {"a": None}], [1.0, {"a": None}]]}, {"$eq": [None, None]},
    {"$not": []}, {"$not": "${none}"}, {"$not": 0.0}, {"$not": "0"}, {"$not": {}}, {"$not": [0]},
    {"$len": "${s}"}, {"$len": "${input}"}, {"$len": 5}, {"$len": None},
    {"$sum": "${xs}"}, {"$sum": []}, {"$sum": [1, "a"]}, {"$sum": [1.5, 2]},
    {"$concat": ["a", 1, None, {"k": [1]}, 2.0]}, {"$concat": ["${n}", "-", "${input}"]}, {"$concat": "xy"},
    {"$add": [{"$len": "${xs}"}, 2]}, {"k": "${s}", "m": {"$add": ["${n}", "${f}"]}}, {"$lt": "ab"},
    # the text of the edges: escapes, quotes, number forms, key order
    {"$concat": [["q\"\\/\n\r\t\b\f\u0001\u007f\u00e9\U0001F600"]]},
    ["it's", 'say "hi"', "both ' \"", "tab\t", "\u00e9", None, True, {"k": False}],
    [1e15, 1e16, 1.5e-07, 2.5e20, 0.0001, 0.00001, 1e-7, 1e21, 123456789012345678, 100.0, 1e300, 0.1],
    {"$add": [0.5, 1.5]}, "${f}${n}", {"b": {"d": 1, "c": [{"z": 0, "y": 1}]}, "a": 2, "B": 3},
    {"$concat": {"b": 1, "a": 2}}, {"$len": {"b": 1, "a": 2}}, "fail: ${input}", "${instance_id}-${n}",
]

# The built-in activities (docs/programs.md "Built-in activities"): (activity, input, executions of one call;
# `propagated` of a call that received no history).
ACTIVITIES: list[tuple[str, Any, int]] = [
    ("echo", {"b": [1, "x"], "a": None}, 2), ("echo", None, 1), ("record", {"k": 1.5}, 2), ("propagated", {"x": 1}, 1),
    ("sleep", None, 1), ("sleep", 0, 1), ("sleep", 0.25, 1), ("sleep", -3, 1), ("sleep", "1", 1), ("sleep", [1], 1),
    ("sleep", True, 1),
    ("fail", 2, 3), ("fail", {"times": 1, "message": {"why": "x"}}, 2), ("fail", {"times": 2}, 3),
    ("fail", {"times": 1, "message": "boom"}, 2), ("fail", None, 1), ("fail", 0, 1), ("fail", {"message": "m"}, 1),
    ("fail", 1.5, 2), ("fail", "2", 1), ("fail", {"times": "x"}, 1), ("fail", [1], 1), ("fail", True, 1),
]


def build(*, evaluate: Any, error: type[Exception], canonical_form: Any = None, canonical_expr: Any = None,
          text: Any = None, builtin: Any = None, failure: type[Exception] | None = None) -> dict[str, Any]:
    """The golden document, computed with the given functions of taskhub_programs."""
    exprs = []
    for e in EXPRESSIONS:
        case: dict[str, Any] = {"expr": e}
        if canonical_expr is not None:
            case["canonical"] = canonical_expr(e)
        try:
            value = evaluate(e, ENV)
        except error as exc:
            case["error"] = "ExpressionError"
            case["message"] = str(exc)
        else:
            case["value"] = value
            case["text"] = text(value) if text is not None else (value if isinstance(value, str) else json.dumps(value))
            case["truthy"] = bool(value)
        exprs.append(case)
    doc: dict[str, Any] = {
        "_generated_by": "python -m tests.programs.golden_cases (inputs in tests/programs/golden_cases.py)",
        "_about": "The canonical program form, the expression semantics and the built-in activities of "
                  "docs/programs.md, for the driver tests of every language: each program's canonical form; each "
                  "expression's canonical form and outcome in `env` (value, its text and truthiness; or an "
                  "ExpressionError, whose message is informative only); each built-in activity's outcome on each "
                  "execution of one call (result and seconds slept, or errorType and errorMessage).",
        "programs": PROGRAMS,
        "env": ENV,
        "expressions": exprs,
    }
    if canonical_form is not None:
        doc["canonical"] = canonical_form(PROGRAMS)
    if builtin is not None:
        doc["activities"] = [{"activity": name, "input": value, "executions": [
            _execution(builtin, failure, name, value, attempt) for attempt in range(1, n + 1)]}
            for name, value, n in ACTIVITIES]
    return doc


def _execution(builtin: Any, failure: Any, name: str, value: Any, attempt: int) -> dict[str, Any]:
    try:
        result, seconds = builtin(name, value, attempt)
    except failure as exc:
        return {"error_type": exc.error_type, "error_message": str(exc)}
    return {"result": result, "sleep": seconds}


def main() -> None:
    import taskhub_programs as P
    from fake_worker.activities import ActivityFailure, builtin

    doc = build(evaluate=P.evaluate, error=P.ExpressionError, canonical_form=P.canonical_form,
                canonical_expr=P.canonical_expr, text=P.text, builtin=builtin, failure=ActivityFailure)
    GOLDEN.write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
