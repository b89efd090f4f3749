"""YAML loading that remembers where every value came from, for `file:line` errors.

Scenario files come from users, so reading is bounded: a size cap on the file, a depth cap on
nesting (PyYAML's composer recurses), a budget on the values a document expands to (aliases
share nodes, so a few hundred bytes can name billions of values), duplicate keys rejected
instead of last-wins, and every reader, scanner and constructor failure turned into a
`InputError` (conformance.errors) with the line it happened on.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import InputError, Problem

MAX_BYTES = 256 << 10  # the largest shipped scenario is ~5 KB
MAX_DEPTH = 64  # nesting levels; the deepest shipped file has 15
MAX_VALUES = 50_000  # values after alias expansion; the largest shipped file has under a thousand


@dataclass(frozen=True)
class Span:
    file: str
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class SourceDoc:
    """A parsed YAML document and the span of every value, keyed by its path of keys/indices.

    The span of a mapping entry is its key's line, so a problem with a key or its value
    points at the line that names it.
    """

    file: str
    data: Any
    spans: dict[tuple[Any, ...], Span]
    lines: tuple[str, ...]

    def span(self, path: tuple[Any, ...]) -> Span:
        """The span of `path`, or of its nearest ancestor that has one."""
        p = tuple(path)
        while p and p not in self.spans:
            p = p[:-1]
        return self.spans.get(p, Span(self.file, 1, 1))

    def excerpt(self, span: Span, *, context: int = 1) -> str:
        return _excerpt(self.lines, span, context=context)


def _excerpt(lines: tuple[str, ...], span: Span, *, context: int = 1) -> str:
    lo = max(1, span.line - context)
    hi = min(len(lines), span.line + context)
    out = []
    for n in range(lo, hi + 1):
        mark = ">" if n == span.line else " "
        out.append(f"  {mark} {n:4d} | {_printable(lines[n - 1])[:160]}")
    return "\n".join(out)


def _printable(line: str) -> str:
    """Control characters shown escaped, so an excerpt cannot garble the terminal."""
    return "".join(ch if ch == "\t" or ch.isprintable() else ascii(ch)[1:-1] for ch in line)


def _syntax_error(span: Span, problem: str, excerpt: str) -> InputError:
    """A file that is not readable YAML: one problem, at the line it happened on."""
    return InputError([Problem(file=span.file, line=span.line, what=problem, excerpt=excerpt)],
                      subject="scenario files")


def load_source(path: Path, *, display: str | None = None) -> SourceDoc:
    file = display or str(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise _syntax_error(Span(file, 1, 1), f"file is {size} bytes; a scenario file is at most {MAX_BYTES} bytes",
                            "")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        lines = _lines(raw.decode("utf-8", errors="replace"))
        span = Span(file, line, column)
        raise _syntax_error(span, f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {column}; "
                                  "save the file as UTF-8", _excerpt(lines, span)) from None
    return parse_source(text, file=file)


class _Depth:
    """The composer bounded in nesting (it recurses once per level)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)  # type: ignore[attr-defined]
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1


class _Loader(_Depth, yaml.SafeLoader):
    """SafeLoader with bounded nesting: PyYAML's own reader, scanner and parser, whose errors the
    messages above are worded for."""


if getattr(yaml, "__with_libyaml__", False):
    class _FastLoader(_Depth, yaml.composer.Composer, yaml._yaml.CParser,  # type: ignore[misc, name-defined]
                      yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's scanner and parser (most of the time a scenario file takes to load) under PyYAML's
        composer, so nesting stays bounded and nodes carry the same marks; a file it refuses is read
        again by `_Loader` for the error message."""

        def __init__(self, stream: str) -> None:
            yaml._yaml.CParser.__init__(self, stream)  # type: ignore[attr-defined]
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

        def get_single_node(self) -> Any:
            return yaml.composer.Composer.get_single_node(self)
else:  # pragma: no cover - a PyYAML built without libyaml
    _FastLoader = None  # type: ignore[assignment, misc]


def _compose(text: str) -> Any:
    if _FastLoader is not None:
        fast = _FastLoader(text)
        try:
            return fast.get_single_node()
        except yaml.YAMLError:
            pass  # worded by PyYAML's own parser below
        finally:
            fast.dispose()
    loader = _Loader(text)  # the reader checks the characters here already
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


# The line breaks PyYAML counts in its marks, so excerpts and reader positions agree with them.
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def _lines(text: str) -> tuple[str, ...]:
    return tuple(_BREAK.split(text))


def parse_source(text: str, *, file: str) -> SourceDoc:
    lines = _lines(text)

    def fail(line: int, column: int, problem: str) -> InputError:
        span = Span(file, line, column)
        return _syntax_error(span, problem, _excerpt(lines, span))

    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ", ".join(part for part in (exc.context, exc.problem) if part) or "cannot be parsed"
        raise fail((mark.line + 1) if mark else 1, (mark.column + 1) if mark else 1,
                   f"not valid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:
        # `position` counts characters of the text; a control character, say, or a lone surrogate.
        before = _lines(text[:exc.position])
        line, column = len(before), len(before[-1]) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise fail(line, column, f"not valid YAML: control character U+{code:04X} at column {column} is not "
                                 "allowed; remove it, or write it as an escape in a double-quoted string") from None
    except yaml.YAMLError as exc:
        raise fail(1, 1, f"not valid YAML: {exc}") from None
    spans: dict[tuple[Any, ...], Span] = {}
    data = _Builder(file, spans, fail).build(node, ()) if node is not None else None
    return SourceDoc(file=file, data=data, spans=spans, lines=lines)


_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


class _Builder:
    """Nodes to plain data, recording spans; bounded in depth and values (aliases expand here)."""

    def __init__(self, file: str, spans: dict[tuple[Any, ...], Span],
                 fail: Callable[[int, int, str], InputError]) -> None:
        self.file, self.spans, self.fail = file, spans, fail
        self.values = 0
        self.constructor = yaml.SafeLoader("")

    def build(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        line, column = node.start_mark.line + 1, node.start_mark.column + 1
        self.values += 1
        if self.values > MAX_VALUES:
            raise self.fail(line, column, f"the document expands to more than {MAX_VALUES} values; "
                                          "aliases (*name) may repeat a part, not multiply the document")
        if len(path) > MAX_DEPTH:
            raise self.fail(line, column, f"nested deeper than {MAX_DEPTH} levels (an alias that contains itself?)")
        self.spans.setdefault(path, Span(self.file, line, column))
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _PLAIN_TAGS:
            raise self.fail(line, column, f"YAML tag {node.tag!r} is not supported; scenario files are plain data")
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, path + (i,)) for i, child in enumerate(node.value)]
        return self._scalar(node)

    def _mapping(self, node: yaml.MappingNode, path: tuple[Any, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise self.fail(line, column, "merge keys (<<) are not supported; write the keys out")
            key = self._scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "a collection"
                raise self.fail(line, column, f"mapping key {shown!r} is not a string; keys are names "
                                              f"(quote it, e.g. \"{shown}\", if it is meant as text)")
            if key in first:
                raise self.fail(line, column, f"duplicate key {key!r} (first at line {first[key]}); "
                                              "YAML would silently keep only the last one")
            first[key] = line
            out[key] = self.build(value_node, path + (key,))
            self.spans[path + (key,)] = Span(self.file, line, column)
        return out

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag == "tag:yaml.org,2002:int" and len(node.value) > 40:
            raise self.fail(node.start_mark.line + 1, node.start_mark.column + 1,
                            f"an integer of {len(node.value)} characters is too large; quote it if it is text")
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or node.start_mark
            raise self.fail(mark.line + 1, mark.column + 1, f"not valid YAML: {exc.problem}") from None
        except (ValueError, OverflowError) as exc:
            # e.g. an integer past Python's digit limit, a date like 2026-13-45, a float overflow
            raise self.fail(node.start_mark.line + 1, node.start_mark.column + 1,
                            f"value {node.value[:40]!r} cannot be read: {exc}") from None


def did_you_mean(word: Any, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest known name, or nothing."""
    names = {str(k).lower(): str(k) for k in known}  # case is a typo too: Workflow -> workflow
    close = difflib.get_close_matches(str(word).lower(), list(names), n=1, cutoff=0.6)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""
