"""Reading a list of explanation entries (traced.yaml, explained.yaml): the YAML, its top-level list and the
exact keys of each entry, with errors that name the file and the entry. What each field must hold is the
caller's to check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import InputError
from conformance.yamlload import safe_load


def read_entries(path: Path, *, key: str, fields: frozenset[str], error: type[InputError],
                 optional: frozenset[str] = frozenset()) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, entry) for each entry of `path`'s `key:` list (none if the file is absent); `where` names the
    entry for the caller's own messages. Raises `error` for a file that is not YAML, has no such list, or an
    entry without exactly `fields` (those of `optional` may be left out)."""
    if not path.is_file():
        return
    try:
        doc = safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise error(f"{path}: not YAML: {exc}") from None
    entries = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise error(f"{path}: expected a mapping with {'an' if key[0] in 'aeiou' else 'a'} '{key}:' list")
    for n, e in enumerate(entries, 1):
        where = f"{path}: entry {n}"
        if not isinstance(e, dict) or not fields - optional <= set(e) <= fields:
            extra = f" (optional: {', '.join(sorted(optional))})" if optional else ""
            raise error(f"{where}: needs exactly the keys {', '.join(sorted(fields - optional))}{extra}")
        yield where, e
