"""Where the contract says it: a requirement's `source` turned into places in docs/spec.md an SDK author
can read without knowing Chinese.

A catalogue source cites the user's spec by its original headings (`seed 000 §状态与历史 (收件箱: 向工作流
引发的外部事件)`). docs/spec.md, its English rendering, keeps each original heading beside its English one
(`### 状态与历史 — State and history`) and the quoted phrases beside their English words, so a citation
resolves to the English heading, the paragraph holding the quoted phrase, its line and the heading's
anchor. Pure: the spec's text comes in as a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SPEC_PATH = "docs/spec.md"
_HEADING = re.compile(r"^(#{2,6})\s+(.*?)\s*$")
_CITE = re.compile(r"§\s*([^(,;§]+?)\s*(?:\(([^)]*)\))?(?=\s*(?:[,;]|$|§))")
_ITEM = re.compile(r"^\s*(?:[-*]|\d+\.)\s")
_EXCERPT_CHARS = 360


@dataclass(frozen=True, kw_only=True)
class Citation:
    """One cited section: its English heading, the words of the contract there, and where to read them."""

    heading: str  # as written in docs/spec.md, e.g. "状态与历史 — State and history"
    english: str  # "State and history"
    line: int  # 1-based line in docs/spec.md of the quoted words (or of the heading)
    anchor: str  # the heading's Markdown anchor, e.g. "状态与历史--state-and-history"
    words: str  # the paragraph holding the quoted phrase, in English (with the original phrase kept)

    @property
    def link(self) -> str:
        return f"{SPEC_PATH}#{self.anchor}"


def anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading: lower case, punctuation dropped,
    each space a hyphen."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _sections(spec: str) -> list[tuple[int, int, str, int]]:
    """(first line, last line, heading text, level) of every heading's section, 1-based lines."""
    lines = spec.splitlines()
    heads = [(i + 1, m.group(2), len(m.group(1))) for i, line in enumerate(lines) if (m := _HEADING.match(line))]
    out = []
    for n, (line, text, level) in enumerate(heads):
        end = next((l2 - 1 for l2, _, lv in heads[n + 1:] if lv <= level), len(lines))
        out.append((line, end, text, level))
    return out


def _paragraph(lines: list[str], index: int) -> str:
    """The blank-line-delimited paragraph around 0-based `index`, Markdown emphasis removed, one line."""
    def item(line: str) -> bool:  # a list item starts a paragraph of its own
        return bool(_ITEM.match(line))

    start = index
    while start > 0 and lines[start - 1].strip() and not _HEADING.match(lines[start - 1]) and not item(lines[start]):
        start -= 1
    end = index
    while (end + 1 < len(lines) and lines[end + 1].strip() and not _HEADING.match(lines[end + 1])
           and not item(lines[end + 1])):
        end += 1
    text = " ".join(l.strip() for l in lines[start:end + 1])
    text = re.sub(r"\*\*|`", "", text)
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS - 1].rstrip() + "…"


def _phrases(quote: str) -> list[str]:
    """The quoted fragments of a citation's parenthesis, longest first (a heading name, then its phrase)."""
    parts = re.split(r"[:;,，；：…]|\.\.\.", quote)
    return sorted({p.strip(" 「」\"'") for p in parts if len(p.strip()) >= 2}, key=len, reverse=True)


def resolve(source: str, spec: str) -> tuple[Citation, ...]:
    """The sections of docs/spec.md (given as `spec`) a catalogue `source` cites; unknown ones are left out."""
    lines = spec.splitlines()
    sections = _sections(spec)
    out: list[Citation] = []
    for part in re.split(r";\s*(?=seed|engine-rules|patching|sdk-behaviour|protocol-facts|DESIGN)", source):
        if not part.strip().startswith("seed"):
            continue
        for m in _CITE.finditer(part):
            name, quote = m.group(1).strip(), (m.group(2) or "")
            found = next(((a, b, t) for a, b, t, _ in sections if t.split(" — ")[0].strip() == name
                          or t.strip() == name), None)
            if found is None:
                continue
            first, last, heading = found
            at = first  # the heading itself, unless a quoted phrase is found below it
            for phrase in _phrases(quote):
                hit = next((i for i in range(first, last) if phrase in lines[i]), None)
                if hit is not None:
                    at = hit + 1
                    break
            english = heading.split(" — ", 1)[1] if " — " in heading else heading
            words = _paragraph(lines, at - 1) if at != first else _paragraph(lines, min(first + 1, len(lines) - 1))
            out.append(Citation(heading=heading, english=english, line=at, anchor=anchor(heading), words=words))
    return tuple(out)


@lru_cache(maxsize=1)
def _spec_text(root: str) -> str:
    path = Path(root) / SPEC_PATH
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def citations(source: str, *, root: Path | None = None) -> tuple[Citation, ...]:
    """`resolve` against the library's docs/spec.md (none when the library ships without docs)."""
    if root is None:
        from conformance.library import find_library

        root = find_library().root
    return resolve(source, _spec_text(str(root)))


__all__ = ["Citation", "SPEC_PATH", "anchor", "citations", "resolve"]
