"""Shared fixtures of the wire-schema tests: where the independent wire facts live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACTS_DIR = Path(__file__).resolve().parent / "facts"


def facts_file(path: Path) -> Path:
    if not path.is_file():
        pytest.fail(f"wire facts file {path} not found; it is part of the repository, restore it from git",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def field_tables_path() -> Path:
    return facts_file(FACTS_DIR / "field-tables.json")


@pytest.fixture(scope="session")
def message_tables_path() -> Path:
    return facts_file(FACTS_DIR / "message-tables.md")


@pytest.fixture(scope="session")
def protocol_facts_path() -> Path:
    return facts_file(ROOT / "docs" / "protocol-facts.md")
