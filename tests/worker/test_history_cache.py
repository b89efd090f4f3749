"""The reference worker's stateful-history cache (fake_worker/history_cache.py, engine-rules R5.7)."""

from __future__ import annotations

from fake_worker.history_cache import HistoryCache
from taskhub_wire import pb


def _events(*names: str) -> list[pb.HistoryEvent]:
    out = []
    for i, name in enumerate(names):
        ev = pb.HistoryEvent(eventId=i)
        ev.eventRaised.name = name
        out.append(ev)
    return out


def _req(iid: str, past: list[pb.HistoryEvent], *, cached: int | None = None, execution: str = "x1") -> pb.WorkflowRequest:
    req = pb.WorkflowRequest(instanceId=iid)
    req.executionId.value = execution
    req.pastEvents.extend(past)
    if cached is not None:
        req.cachedHistory.eventCount = cached
    return req


def _names(events) -> list[str]:
    return [e.eventRaised.name for e in events]


def _no_fetch(iid: str) -> list[pb.HistoryEvent]:
    raise AssertionError(f"unexpected GetInstanceHistory for {iid}")


def test_a_delta_is_joined_to_the_kept_prefix():
    cache = HistoryCache()
    first = cache.resolve(_req("a", _events("1", "2")), fetch=_no_fetch)
    assert first.source == "full" and _names(first.past) == ["1", "2"]
    second = cache.resolve(_req("a", _events("3"), cached=2), fetch=_no_fetch)
    assert second.source == "delta" and _names(second.past) == ["1", "2", "3"]
    third = cache.resolve(_req("a", [], cached=3), fetch=_no_fetch)  # nothing new in the past
    assert _names(third.past) == ["1", "2", "3"] and cache.misses == 0


def test_a_miss_reads_the_committed_history():
    fetched: list[str] = []

    def fetch(iid: str) -> list[pb.HistoryEvent]:
        fetched.append(iid)
        return _events("1", "2", "3")

    cache = HistoryCache()
    got = cache.resolve(_req("a", _events("3"), cached=2), fetch=fetch)  # never seen on this stream
    assert got.source == "miss" and _names(got.past) == ["1", "2", "3"] and fetched == ["a"]
    assert cache.resolve(_req("a", _events("4"), cached=3), fetch=_no_fetch).source == "delta"


def test_another_execution_is_a_miss_not_a_splice():
    cache = HistoryCache()
    cache.resolve(_req("a", _events("old1", "old2", "old3")), fetch=_no_fetch)
    got = cache.resolve(_req("a", _events("new3"), cached=2, execution="x2"),
                        fetch=lambda iid: _events("new1", "new2", "new3"))
    assert got.source == "miss" and _names(got.past) == ["new1", "new2", "new3"]


def test_the_size_limit_evicts_the_least_recently_used():
    cache = HistoryCache(max_instances=1)
    cache.resolve(_req("a", _events("a1")), fetch=_no_fetch)
    cache.resolve(_req("b", _events("b1")), fetch=_no_fetch)
    got = cache.resolve(_req("a", _events("a2"), cached=1), fetch=lambda iid: _events("a1", "a2"))
    assert got.source == "miss" and cache.misses == 1
    none = HistoryCache(max_instances=0)
    none.resolve(_req("a", _events("a1")), fetch=_no_fetch)
    assert none.resolve(_req("a", _events("a2"), cached=1), fetch=lambda iid: _events("a1", "a2")).source == "miss"


def test_the_reference_worker_announces_it_and_recovers_misses_through_the_engine():
    """The shipped cache-miss scenario on the reference pair: deltas arrive, and only the miss reads history."""
    import dataclasses
    from pathlib import Path

    from conformance.events import Outcome
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    root = Path(__file__).resolve().parents[2] / "scenarios"
    shipped = load_scenario(root / "connection" / "stateful-history-cache-miss.yaml", root=root)
    unbounded = dataclasses.replace(shipped, worker={"stateful_history": True})
    reads = []
    for scenario in (shipped, unbounded):
        result = run_scenario(scenario, load_targets().pair("reference", "reference"), reproduce="r")
        assert result.outcome is Outcome.PASSED, result.message
        items = [e for e in result.transcript if e.rpc == "GetWorkItems" and e.direction == "item"]
        assert any("cachedHistory" in (e.message or {}).get("workflowRequest", {}) for e in items)
        reads.append(sum(1 for e in result.transcript if e.rpc == "GetInstanceHistory" and e.direction == "request"))
    assert reads[0] > reads[1], f"the evicting worker reads histories back ({reads[0]} vs {reads[1]} reads)"
