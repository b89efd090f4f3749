"""Replays sent ahead (while the schedule still runs) are judged like replays sent at the end.

A self-oracle campaign on a worker of several streams sends each answered turn's replays at once
(`SelfOracleCampaign._replay_early`, through the pool's `submit_many`). These tests run the
campaign on two in-process "processes" of the reference worker: it must stay free of findings
(every replay is matched with its own turn), a process that answers one turn
two ways must be a self-determinism finding, and a second process that answers otherwise a
fresh-process finding. `workers.Slots` lets a waiting urgent turn go before turns sent ahead.
"""

from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from fake_worker.replay import execute

from conformance.fuzz.common import Budget
from conformance.fuzz.self_oracle import SelfOracleCampaign
from conformance.fuzz.workers import Slots, wait_until

EXAMPLES = 120


@pytest.fixture(autouse=True)
def quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


class TwoStreams:
    """Two in-process processes of a worker with the `DriverPool` interface the campaign uses;
    `change(stream, seen_before, result)` alters an answer."""

    streams = 2

    def __init__(self, bundle, change=None) -> None:
        self.bundle, self.change, self.name = bundle, change, "two-streams"
        self.ahead = 0
        self._seen: set[tuple[int, bytes]] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8)

    def answer(self, case, *, stream: int = 0):
        result = execute(self.bundle, instance_id=case.instance_id, past=case.past, new=case.new)
        key = (stream, b"".join(e.SerializeToString(deterministic=True) for e in (*case.past, *case.new)))
        with self._lock:
            seen = key in self._seen
            self._seen.add(key)
        if self.change is not None:
            result = self.change(stream, seen, result)
        return result.response(instance_id=case.instance_id, completion_token="")

    def answer_many(self, jobs):
        return [self.answer(case, stream=s) for s, case in jobs]

    def submit_many(self, jobs):
        self.ahead += len(jobs)
        return [self._pool.submit(self.answer, case, stream=s) for s, case in jobs]

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def run(change=None) -> tuple[SelfOracleCampaign, list[TwoStreams]]:
    made: list[TwoStreams] = []

    def make(bundle, doc):
        made.append(TwoStreams(bundle, change))
        return made[-1]

    c = SelfOracleCampaign(target="two-streams", budget=Budget(examples=EXAMPLES), derandomize=True,
                           make_worker=make, fresh_process=False, database=None, robustness=False)
    c.run()
    return c, made


def test_reference_on_two_streams_has_no_finding_and_replays_go_ahead():
    c, made = run()
    assert [f.headline() for f in c.findings] == []
    assert sum(w.ahead for w in made) > 0  # the replays did go out while the schedule ran


def test_a_process_answering_one_turn_two_ways_is_found():
    counter = itertools.count()  # every other answer of the first process carries a custom status
    c, _ = run(lambda stream, seen, r: replace(r, custom_status="odd") if stream == 0 and next(counter) % 2 else r)
    assert "self-determinism" in {f.kind for f in c.findings}, [f.headline() for f in c.findings]


def test_another_process_answering_differently_is_found():
    c, _ = run(lambda stream, seen, r: replace(r, custom_status="other") if stream == 1 else r)
    assert "self-determinism-fresh-process" in {f.kind for f in c.findings}, [f.headline() for f in c.findings]


def test_an_urgent_turn_goes_before_turns_sent_ahead():
    slots, order, release = Slots(1), [], threading.Event()

    def take(name: str, urgent: bool, hold: threading.Event | None = None) -> None:
        with slots.held(urgent=urgent):
            order.append(name)
            if hold is not None:
                hold.wait(10)

    holder = threading.Thread(target=take, args=("holder", True, release))
    holder.start()
    assert wait_until(lambda: order == ["holder"], 10)
    ahead = threading.Thread(target=take, args=("ahead", False))
    ahead.start()
    urgent = threading.Thread(target=take, args=("urgent", True))
    urgent.start()
    assert wait_until(lambda: slots._urgent_waiting == 1, 10)
    release.set()
    for t in (holder, ahead, urgent):
        t.join(10)
    assert order == ["holder", "urgent", "ahead"]
