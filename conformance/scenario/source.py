"""YAML loading that remembers where every value came from, for `file:line` errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Span:
    file: str
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class SourceDoc:
    """A parsed YAML document and the span of every value, keyed by its path of keys/indices."""

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
        lo = max(1, span.line - context)
        hi = min(len(self.lines), span.line + context)
        out = []
        for n in range(lo, hi + 1):
            mark = ">" if n == span.line else " "
            out.append(f"  {mark} {n:4d} | {self.lines[n - 1]}")
        return "\n".join(out)


class YamlSyntaxError(Exception):
    def __init__(self, span: Span, problem: str, excerpt: str) -> None:
        super().__init__(f"{span}: {problem}")
        self.span, self.problem, self.excerpt = span, problem, excerpt


def load_source(path: Path, *, display: str | None = None) -> SourceDoc:
    text = path.read_text(encoding="utf-8")
    return parse_source(text, file=display or str(path))


def parse_source(text: str, *, file: str) -> SourceDoc:
    lines = tuple(text.splitlines())
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        span = Span(file, (mark.line + 1) if mark else 1, (mark.column + 1) if mark else 1)
        doc = SourceDoc(file=file, data=None, spans={}, lines=lines)
        raise YamlSyntaxError(span, f"not valid YAML: {exc.problem or exc.context}", doc.excerpt(span)) from None
    spans: dict[tuple[Any, ...], Span] = {}
    data = _build(node, (), spans, file) if node is not None else None
    return SourceDoc(file=file, data=data, spans=spans, lines=lines)


def _build(node: yaml.Node, path: tuple[Any, ...], spans: dict[tuple[Any, ...], Span], file: str) -> Any:
    spans[path] = Span(file, node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            # Scenario keys are scalars; a complex key is kept as its text and rejected by validation.
            key = _scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            out[key] = _build(value_node, path + (key,), spans, file)
            spans.setdefault(path + (key,), Span(file, key_node.start_mark.line + 1, key_node.start_mark.column + 1))
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(child, path + (i,), spans, file) for i, child in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.ScalarNode) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()
