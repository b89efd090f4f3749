"""Shared fixtures of the wire-schema tests: where the reference facts live."""

from __future__ import annotations

from pathlib import Path

import pytest

# The CI checkout has shared/ beside the repository (X/main-clone and X/shared).
SHARED_DIR = Path(__file__).resolve().parents[2].parent / "shared"
REFERENCE_DIR = SHARED_DIR / "reference"


def reference_file(name: str) -> Path:
    path = REFERENCE_DIR / name
    if not path.is_file():
        pytest.fail(
            f"reference file {name} not found: looked for {path} (shared/ must sit beside the repository checkout)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def field_tables_path() -> Path:
    return reference_file("field-tables.json")


@pytest.fixture(scope="session")
def message_tables_path() -> Path:
    return reference_file("message-tables.md")


@pytest.fixture(scope="session")
def protocol_facts_path() -> Path:
    return reference_file("protocol-facts.md")
