"""A campaign's examples go to its own share of the example database, seeded or not (public API only)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from conformance.fuzz.common import KeyedDatabase, configured, hypothesis_settings, key


def failing_test():
    @given(st.integers(min_value=0, max_value=1000))
    def at_most_ten(n: int) -> None:
        assert n <= 10

    return at_most_ten


def saved(directory) -> int:
    return sum(1 for p in directory.rglob("*") if p.is_file())


def test_a_seeded_campaign_keeps_its_database(tmp_path):
    chosen = hypothesis_settings(max_examples=100, database=tmp_path, share=key("a"))
    with pytest.raises(AssertionError):
        configured(failing_test(), with_settings=chosen, seed=7)()
    assert saved(tmp_path) > 0, "@seed turned the example database off"


def test_each_share_sees_only_its_own_examples(tmp_path):
    for share in ("a", "b"):
        with pytest.raises(AssertionError):
            configured(failing_test(), with_settings=hypothesis_settings(
                max_examples=100, database=tmp_path, share=key(share)), seed=7)()
    inner = DirectoryBasedExampleDatabase(str(tmp_path))
    a, b = KeyedDatabase(inner, key("a")), KeyedDatabase(inner, key("b"))
    a.save(b"k", b"v")
    assert list(a.fetch(b"k")) == [b"v"] and list(b.fetch(b"k")) == []
    a.move(b"k", b"m", b"v")
    assert list(a.fetch(b"m")) == [b"v"] and list(a.fetch(b"k")) == []
    a.delete(b"m", b"v")
    assert list(a.fetch(b"m")) == []
