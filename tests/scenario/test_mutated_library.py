"""Mutated copies of the shipped scenario files: `validate` loads them or exits 2 with `file:line`.

Hypothesis garbles a real scenario file (byte flips, truncation, control characters, duplicated
and renamed keys, deep nesting, alias bombs, huge numbers) and runs `conformance validate` on it
in this process. The only allowed outcomes are exit 0 (the mutant is still a valid scenario) or
exit 2 with every problem on a `file:line:` line; never an exception, never the validator's
last-resort "internal error". The work per example is bounded by the loader's own limits (file
size, nesting depth, values after alias expansion), not by a time limit here.
"""

from __future__ import annotations

import io
import re
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import cli

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"  # the shipped files, in this checkout
FILES = sorted(p.relative_to(LIBRARY).as_posix() for p in LIBRARY.rglob("*.yaml"))
KEY_LINE = re.compile(rb"^(\s*(?:- )?)([A-Za-z_$][A-Za-z0-9_]*):", re.M)


def _flip(data: bytes, draw) -> bytes:
    i = draw(st.integers(0, max(len(data) - 1, 0)))
    return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]


def _truncate(data: bytes, draw) -> bytes:
    return data[:draw(st.integers(0, len(data)))]


def _control(data: bytes, draw) -> bytes:
    i = draw(st.integers(0, len(data)))
    char = draw(st.sampled_from([b"\x00", b"\x07", b"\x08", b"\x0b", b"\x0c", b"\x1b", b"\x7f", b"\r", b"\t",
                                 "\u0085".encode(), "\u2028".encode(), "\ufeff".encode()]))
    return data[:i] + char + data[i:]


def _key_lines(data: bytes) -> list[re.Match[bytes]]:
    return list(KEY_LINE.finditer(data))


def _duplicate_key(data: bytes, draw) -> bytes:
    lines = _key_lines(data)
    if not lines:
        return data
    m = draw(st.sampled_from(lines))
    end = data.find(b"\n", m.start())
    end = len(data) if end < 0 else end
    line = data[m.start():end]
    indent = re.match(rb"\s*", line).group()
    return data[:end] + b"\n" + indent + line.lstrip().removeprefix(b"- ") + data[end:]


def _rename_key(data: bytes, draw) -> bytes:
    lines = _key_lines(data)
    if not lines:
        return data
    m = draw(st.sampled_from(lines))
    key = m.group(2)
    how = draw(st.sampled_from(["drop", "double", "swap", "upper"]))
    i = draw(st.integers(0, len(key) - 1))
    new = {"drop": key[:i] + key[i + 1:], "double": key[:i] + key[i:i + 1] * 2 + key[i + 1:],
           "swap": key[:i] + key[i + 1:i + 2] + key[i:i + 1] + key[i + 2:], "upper": key.upper()}[how] or b"x"
    return data[:m.start(2)] + new + data[m.end(2):]


def _nest(data: bytes, draw) -> bytes:
    lines = _key_lines(data)
    depth = draw(st.integers(1, 3000))
    open_, close = draw(st.sampled_from([(b"[", b"]"), (b"{a: ", b"}")]))
    value = b" " + open_ * depth + b"1" + close * depth
    if not lines:
        return data + b"x:" + value + b"\n"
    m = draw(st.sampled_from(lines))
    end = data.find(b"\n", m.start())
    end = len(data) if end < 0 else end
    return data[:m.end()] + value + data[end:]


def _alias_bomb(data: bytes, draw) -> bytes:
    levels, width = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    bomb = [b"bomb0: &b0 [lol]"] + [b"bomb%d: &b%d [%s]" % (i, i, b", ".join([b"*b%d" % (i - 1)] * width))
                                    for i in range(1, levels + 1)]
    where = draw(st.sampled_from(["end", "start"]))
    text = b"\n".join(bomb) + b"\n"
    return data + b"\n" + text if where == "end" else text + data


def _huge_number(data: bytes, draw) -> bytes:
    numbers = list(re.finditer(rb"(?<![\w.])\d+(?![\w.])", data))
    if not numbers:
        return data
    m = draw(st.sampled_from(numbers))
    digits = draw(st.sampled_from([20, 400, 5000]))
    sign = draw(st.sampled_from([b"", b"-"]))
    return data[:m.start()] + sign + b"9" * digits + data[m.end():]


MUTATIONS = [_flip, _truncate, _control, _duplicate_key, _rename_key, _nest, _alias_bomb, _huge_number]


@st.composite
def mutants(draw) -> tuple[str, bytes]:
    rel = draw(st.sampled_from(FILES))
    data = (LIBRARY / rel).read_bytes()
    for mutate in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        data = mutate(data, draw)
    return rel, data


@settings(max_examples=150)
@given(mutants())
def test_a_mutated_scenario_file_loads_or_is_a_file_line_error(mutant):
    rel, data = mutant
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / rel
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(["validate", "--scenarios", tmp])
    stderr = err.getvalue()
    assert "internal error" not in stderr, stderr
    if code == 0:
        assert out.getvalue().startswith("1 scenario(s) valid"), out.getvalue()
        return
    assert code == 2, (code, stderr)
    first, *rest = stderr.splitlines()
    # Every problem line is `file:line: message`; the other lines are excerpts, indented.
    problem_lines = [ln for ln in rest if not ln.startswith(" ")]
    assert re.fullmatch(r"conformance: \d+ problems? in scenario files:", first), stderr  # conformance.errors
    assert problem_lines, stderr
    for line in problem_lines:
        assert re.match(rf"{re.escape(str(path))}:\d+: \S", line), line
