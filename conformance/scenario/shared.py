"""Loaded scenarios handed from one process to others (the pytest path's xdist controller to its workers),
so each file is parsed once per run instead of once per worker."""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any


def _proxy(items: dict[Any, Any]) -> MappingProxyType:
    return MappingProxyType(items)


class _Pickler(pickle.Pickler):
    # Frozen scenario models hold read-only mappings, which pickle cannot name; they travel as dicts.
    dispatch_table = {**copyreg.dispatch_table, MappingProxyType: lambda m: (_proxy, (dict(m),))}


def dump_scenarios(scenarios: Mapping[str, Any], path: Path) -> Path:
    """Write `scenarios` (file path -> loaded Scenario) to `path`."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(dict(scenarios))
    path.write_bytes(buffer.getvalue())
    return path


def load_scenarios(path: Path) -> dict[str, Any]:
    """What `dump_scenarios` wrote (a file this run made itself, never one from elsewhere)."""
    return pickle.loads(path.read_bytes())  # noqa: S301 - written by this run's own controller
