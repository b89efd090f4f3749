"""A full disk: a refused write reaches the caller as RESOURCE_EXHAUSTED with SQLite's own message,
memory stays exactly as the database, and a restart shows what callers were told.

The database lives on a 3 MB tmpfs when this process may mount one (root); otherwise on the
ordinary disk with SQLite's `PRAGMA max_page_count`, which fails writes with the same
SQLITE_FULL ("database or disk is full"). The test names the variant it ran in its output.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from fake_sidecar.engine import Engine, RealClock
from fake_sidecar.engine.errors import StoreFull
from fake_sidecar.engine.store import SqliteStore
from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient

PAYLOAD = "x" * 100_000
STARTS = 60
PAGE_LIMIT = 700  # pages of 4 KiB: about 2.8 MB, like the tmpfs


@dataclass(frozen=True)
class SmallDisk:
    db: Path
    tmpfs: bool

    def limit(self, store: SqliteStore) -> None:
        """Cap the database where no tmpfs does it."""
        if not self.tmpfs:
            store._db.execute(f"PRAGMA max_page_count = {PAGE_LIMIT}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = False
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                              capture_output=True, text=True)
        mounted = done.returncode == 0
    print(f"full disk simulated with {'a 3 MB tmpfs' if mounted else 'PRAGMA max_page_count'}")
    try:
        yield SmallDisk(db=mnt / "s.db", tmpfs=mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def _open(disk: SmallDisk) -> Engine:
    store = SqliteStore(disk.db)
    disk.limit(store)
    return Engine(store=store, clock=RealClock())


def test_a_refused_start_is_not_reported_and_a_restart_shows_what_callers_were_told(small_disk: SmallDisk) -> None:
    engine = _open(small_disk)
    started: list[str] = []
    refused: dict[str, StoreFull] = {}
    try:
        for i in range(STARTS):
            iid = f"big-{i:02d}"
            try:
                engine.start_instance(instance_id=iid, name="wf", input=PAYLOAD,
                                      scheduled_start_ns=engine.clock.now_ns() + 3600 * 10**9)
            except StoreFull as exc:
                refused[iid] = exc
            else:
                started.append(iid)
        assert refused, f"all {STARTS} starts of 100 KB fitted; the disk was not filled"
        assert started, "not one start fitted on the disk"
        for iid, exc in refused.items():
            assert "database or disk is full" in exc.message, exc.message
            assert engine.get_instance(iid) is None, f"{iid}: its start was refused, yet GetInstance reports it"
        for iid in started:
            view = engine.get_instance(iid)
            assert view is not None and view.input == PAYLOAD, f"{iid}: its start was acknowledged, yet it is gone"
        assert sorted(engine.instance_ids()) == sorted(started)
    finally:
        engine.close()
    again = _open(small_disk)
    try:
        assert sorted(again.instance_ids()) == sorted(started), "after a restart the state is not what callers were told"
        for iid in started:
            view = again.get_instance(iid)
            assert view is not None and view.input == PAYLOAD
    finally:
        again.close()


def test_start_instance_on_a_full_disk_answers_resource_exhausted_with_sqlite_s_message(small_disk: SmallDisk) -> None:
    server = SidecarServer.start(port=0, db=str(small_disk.db))
    assert isinstance(server.engine.store, SqliteStore)
    small_disk.limit(server.engine.store)
    channel = grpc.insecure_channel(server.address)
    client = TaskHubClient(channel)
    errors: list[grpc.RpcError] = []
    acknowledged: list[str] = []
    try:
        for i in range(STARTS):
            req = pb.CreateInstanceRequest(instanceId=f"rpc-{i:02d}", name="wf")
            req.input.value = PAYLOAD
            req.scheduledStartTimestamp.seconds = 4_000_000_000  # in the future: no worker needed
            try:
                client.call("StartInstance", req, timeout=30)
            except grpc.RpcError as exc:
                errors.append(exc)
            else:
                acknowledged.append(req.instanceId)
        assert errors, "the disk was not filled"
        for exc in errors:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (exc.code(), exc.details())
            assert "database or disk is full" in exc.details(), exc.details()
            assert "rollback" not in exc.details(), exc.details()
        for i in range(STARTS):
            iid = f"rpc-{i:02d}"
            got = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid), timeout=10)
            assert got.exists == (iid in acknowledged), f"{iid}: exists={got.exists}, acknowledged={iid in acknowledged}"
    finally:
        channel.close()
        server.stop()


def _snapshot(engine: Engine) -> dict[str, tuple[int, str | None, int]]:
    """What GetInstance would tell a caller about every instance: status, output, history length."""
    out = {}
    for iid in engine.instance_ids():
        view = engine.get_instance(iid)
        assert view is not None
        out[iid] = (view.status, view.output, len(engine.history(iid)))
    return out


def test_turns_refused_by_a_full_disk_leave_memory_as_the_database(small_disk: SmallDisk) -> None:
    """With a worker: first turns (each stores the 100 KB input again) hit the full disk too. The
    worker's CompleteOrchestratorTask gets RESOURCE_EXHAUSTED, the engine keeps the turn undone
    (redelivered with back-off), and a restart shows exactly what memory showed."""
    from concurrent.futures import ThreadPoolExecutor

    from fake_worker.client import Worker, WorkerOptions
    from taskhub_programs import parse_bundle

    server = SidecarServer.start(port=0, db=str(small_disk.db))
    assert isinstance(server.engine.store, SqliteStore)
    small_disk.limit(server.engine.store)
    worker = Worker(bundle=parse_bundle({"programs": {"wf": {"steps": [{"return": "done"}]}}}),
                    options=WorkerOptions(sidecar=server.address))
    runner = ThreadPoolExecutor(max_workers=1)
    runner.submit(worker.run)
    codes: dict[str, str] = {}

    def start(i: int) -> None:
        req = pb.CreateInstanceRequest(instanceId=f"turn-{i:02d}", name="wf")
        req.input.value = f'"{PAYLOAD}"'  # JSON, as the worker's program reads it
        with grpc.insecure_channel(server.address) as ch:
            try:
                TaskHubClient(ch).call("StartInstance", req, timeout=8)
                codes[req.instanceId] = "OK"
            except grpc.RpcError as exc:
                codes[req.instanceId] = exc.code().name
                assert exc.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED), \
                    (exc.code(), exc.details())

    try:
        assert worker.connected_once.wait(10)
        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(start, range(30)))
        assert "OK" in codes.values() and set(codes.values()) != {"OK"}, codes
        worker.stop()
        runner.shutdown(wait=True)
        before = _snapshot(server.engine)
    finally:
        worker.stop()
        runner.shutdown(wait=True)
        server.stop()
    for iid, code in codes.items():
        if code == "OK":
            assert before[iid][0] == pb.ORCHESTRATION_STATUS_COMPLETED, (iid, before[iid])
        elif code == "RESOURCE_EXHAUSTED":
            assert iid not in before, f"{iid}: its start was refused, yet it is reported"
    again = _open(small_disk)
    try:
        assert _snapshot(again) == before, "after a restart the instances differ from what callers were shown"
    finally:
        again.close()


def test_a_refused_write_keeps_the_turn_out_on_a_stream(tmp_path: Path) -> None:
    """A RaiseEvent refused while a turn is out: the rollback reloads the instance from the db but
    keeps that turn, so the worker's answer still applies; the refused event exists nowhere."""
    store = SqliteStore(tmp_path / "s.db")
    engine = Engine(store=store, clock=RealClock())
    try:
        engine.start_instance(instance_id="a", name="wf", input=None)
        sid = engine.open_stream()
        item = engine.take(sid, timeout=5)
        assert item is not None and item.HasField("workflowRequest")
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")  # the next growth of the file fails
        with pytest.raises(StoreFull):
            engine.raise_event(iid="a", name="ev", input="x" * 100_000)
        store._db.execute("PRAGMA max_page_count = 1073741823")
        resp = pb.WorkflowResponse(instanceId="a", completionToken=item.completionToken)
        done = resp.actions.add(id=1)
        done.completeWorkflow.workflowStatus = pb.ORCHESTRATION_STATUS_COMPLETED
        assert engine.complete_turn(resp) == "applied"
        view = engine.get_instance("a")
        assert view is not None and view.status == pb.ORCHESTRATION_STATUS_COMPLETED
        kinds = [e.WhichOneof("eventType") for e in engine.history("a")]
        assert "eventRaised" not in kinds, kinds
    finally:
        engine.close()
    again = Engine(store=SqliteStore(tmp_path / "s.db"), clock=RealClock())
    try:
        assert [e.WhichOneof("eventType") for e in again.history("a")] == kinds
        assert again.get_instance("a").status == pb.ORCHESTRATION_STATUS_COMPLETED
    finally:
        again.close()
