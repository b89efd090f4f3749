"""Regenerate python.json, the Python side of pyjson_test.go (run from the repository root):

    .venv/bin/python drivers/durabletask_go/testdata/gen_python.py

It records what Python's json.dumps / str() and taskhub_programs.evaluate give, so the Go
driver's re-implementation can be checked against them without Python at test time.
"""

import json
from pathlib import Path

from taskhub_programs import ExpressionError, evaluate

ENV = {"input": {"b": 2, "a": [1, 2.0, "x"]}, "xs": [1, 2, 3], "s": "héllo", "n": 3, "f": 1.5, "t": True, "none": None}
EXPRESSIONS = [
    "${input}", "n=${xs}", "${input.a.-1}", "${input.a.1}", {"$add": [1, 2]}, {"$add": [1, 2.0]},
    {"$add": ["a", 1, [1, 2]]}, {"$add": "abc"}, {"$sub": [5, 7]}, {"$sub": [5.5, 1]}, {"$lt": [1, 2]},
    {"$le": ["b", "a"]}, {"$eq": [1, 1.0]}, {"$eq": [True, 1]}, {"$eq": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]},
    {"$not": []}, {"$len": "${s}"}, {"$len": "${input}"}, {"$sum": "${xs}"}, {"$sum": []},
    {"$concat": ["a", 1, None, {"k": [1]}, 2.0]}, {"k": "${s}", "m": {"$add": ["${n}", "${f}"]}},
    "${s} and ${t} and ${none}", "${missing}", "${input.zz}", {"$lt": [1, "a"]}, {"$sub": [1]}, {"$len": 5},
    {"$add": [[1], [2]]}, {"$lt": [[1, 2], [1, 3]]}, {"$add": [True, True]}, {"$sum": [1, "a"]}, "${ n }",
    "${xs.5}", {"$not": "${none}"}, {"$eq": [[1, {"a": None}], [1.0, {"a": None}]]}, {"$add": [0.1, 0.2]},
    {"$sub": [1e16, 1]}, "x${f}y${input.a}",
]
DUMPS = [
    "1", "1.0", "-0.0", "1e16", "1e15", "123456789012345678", "0.0001", "0.00001", "1.5e-7", "3.14", "1e300",
    '[1, 2.5, "a\\u00e9\\ud83d\\ude00\\n\\u0007\\u007f<>&\\"\\\\/\\t\\r\\b\\f"]',
    '{"b": 1, "a": [true, false, null], "c": {}, "b": 3}', "2.5e+20", "123456.789", "9007199254740993",
    "1.7976931348623157e308", "5e-324", "0.1", "100.0", "12345678901234567.0", "[]", '""', "-12.5e-3", "1E2",
]


def main() -> None:
    cases = []
    for e in EXPRESSIONS:
        try:
            cases.append({"expr": e, "ok": json.dumps(evaluate(e, ENV))})
        except ExpressionError as exc:
            cases.append({"expr": e, "err": str(exc)})
    dumps = [{"json": c, "dumps": json.dumps(json.loads(c)), "str": str(json.loads(c))} for c in DUMPS]
    doc = {"_generated_by": "drivers/durabletask_go/testdata/gen_python.py", "env": ENV, "expressions": cases,
           "dumps": dumps}
    Path(__file__).with_name("python.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
