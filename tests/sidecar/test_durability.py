"""Durability: `kill -9` the sidecar process mid-run, restart it on the same --db, and nothing
acknowledged is lost and nothing is applied twice.

The sidecar runs as a subprocess (`python -m fake_sidecar --db <tmp>/s.db --port 0`); a worker
thread in the test (RawWorker-style, reconnecting whenever its stream breaks) runs a chain of
three activities per instance:

    on each turn:   n = number of TaskCompleted in past + new events
                    n < 3 -> ScheduleTask{id n+1, name "step", input str(n)}
                    else  -> CompleteWorkflow{id n+1, result str(n)}
    each activity:  result = input
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient
from tests.sidecar.rawworker import RawWorker, complete, kinds, schedule
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
STEPS = 3


# ----------------------------------------------------------------------------- the sidecar process

class SidecarProcess:
    """`python -m fake_sidecar` on a db; always ended by pid (SIGTERM, kill -9, or at teardown)."""

    def __init__(self, db: Path, port: int = 0) -> None:
        env = {k: v for k, v in os.environ.items() if k != "DAPR_API_TOKEN"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "fake_sidecar", "--host", "127.0.0.1", "--port", str(port), "--db", str(db)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        self.address = ""

    def _pump_out(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_err(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self._err.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._err)

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """True once it prints its ready line; False if it exits first."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the sidecar printed nothing in {timeout}s; stderr:\n{self.stderr[-3000:]}") from None
        if line is None:
            self.popen.wait(timeout=10)
            time.sleep(0.1)  # let stderr drain
            return False
        assert line.startswith("listening on "), line
        self.address = line.removeprefix("listening on ").strip()
        return True

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def kill9(self) -> None:
        os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


@pytest.fixture
def processes() -> Iterator[list[SidecarProcess]]:
    procs: list[SidecarProcess] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()


def launch(procs: list[SidecarProcess], db: Path) -> SidecarProcess:
    proc = SidecarProcess(db)
    procs.append(proc)
    assert proc.wait_ready(), f"the sidecar did not start (exit {proc.popen.returncode}):\n{proc.stderr[-3000:]}"
    return proc


def relaunch(procs: list[SidecarProcess], db: Path, port: int, *, busy_for: float = 5.0) -> SidecarProcess:
    """Restart on the same db, on the same port if it frees up in time, else on a new one."""
    deadline = time.monotonic() + busy_for
    while True:
        try_port = port if time.monotonic() < deadline else 0
        proc = SidecarProcess(db, try_port)
        procs.append(proc)
        if proc.wait_ready():
            return proc
        err = proc.stderr
        port_busy = try_port != 0 and ("in use" in err or "bind" in err.lower())
        if not port_busy:
            raise AssertionError(f"the sidecar did not restart on its db (exit {proc.popen.returncode}):\n"
                                 f"{err[-3000:]}")
        time.sleep(0.2)


# ----------------------------------------------------------------------------- the worker

class ChainWorker(threading.Thread):
    """Runs the 3-step chain over GetWorkItems; reconnects (to `self.address`) when the stream breaks."""

    def __init__(self, address: str, *, activity_delay: float = 0.0) -> None:
        super().__init__(daemon=True, name="chain-worker")
        self.address = address
        self.activity_delay = activity_delay
        self.acked = 0  # CompleteActivityTask calls that returned OK
        self.turns = 0
        self.connects = 0
        self.activities: list[tuple[str, int, int]] = []  # (instance, taskId, connection number)
        self.first_turns: list[tuple[str, int]] = []  # turns carrying ExecutionStarted, per connection
        self.errors: list[BaseException] = []
        self._halt = threading.Event()
        self._call: grpc.Call | None = None
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._halt.is_set():
            channel = grpc.insecure_channel(self.address)
            client = TaskHubClient(channel)
            try:
                call = client.stream("GetWorkItems", pb.GetWorkItemsRequest())
                with self._lock:
                    self._call = call
                    self.connects += 1
                    conn = self.connects
                for item in call:
                    if self._halt.is_set():
                        break
                    self._handle(client, item, conn)
            except grpc.RpcError:
                pass  # the stream broke (sidecar killed): reconnect
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)
            finally:
                channel.close()
            self._halt.wait(0.1)

    def _handle(self, client: TaskHubClient, item: pb.WorkItem, conn: int) -> None:
        if item.HasField("activityRequest"):
            req = item.activityRequest
            with self._lock:
                self.activities.append((req.workflowInstance.instanceId, req.taskId, conn))
            if self.activity_delay:
                time.sleep(self.activity_delay)
            resp = pb.ActivityResponse(instanceId=req.workflowInstance.instanceId, taskId=req.taskId,
                                       completionToken=item.completionToken)
            resp.result.value = req.input.value
            client.call("CompleteActivityTask", resp, timeout=10)
            with self._lock:
                self.acked += 1
            return
        req = item.workflowRequest
        events = list(req.pastEvents) + list(req.newEvents)
        if any(e.HasField("executionStarted") for e in req.newEvents):
            with self._lock:
                self.first_turns.append((req.instanceId, conn))
        n = sum(1 for e in events if e.HasField("taskCompleted"))
        action = schedule(n + 1, "step", str(n)) if n < STEPS else complete(n + 1, str(n))
        resp = pb.WorkflowResponse(instanceId=req.instanceId, completionToken=item.completionToken)
        resp.actions.append(action)
        client.call("CompleteWorkflowTask", resp, timeout=10)
        with self._lock:
            self.turns += 1

    def stop(self) -> None:
        self._halt.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()
        self.join(timeout=10)


class Sorter:
    """Takes items of one kind from a RawWorker, keeping the others for later."""

    def __init__(self, worker: RawWorker) -> None:
        self.worker = worker
        self.kept: list[pb.WorkItem] = []

    def next(self, kind: str, timeout: float = 10.0) -> pb.WorkItem:
        for i, item in enumerate(self.kept):
            if item.WhichOneof("request") == kind:
                return self.kept.pop(i)
        end = time.monotonic() + timeout
        while True:
            item = self.worker.next(max(0.01, end - time.monotonic()))
            if item.WhichOneof("request") == kind:
                return item
            self.kept.append(item)


def _start(client: TaskHubClient, iid: str) -> str:
    return client.call("StartInstance", pb.CreateInstanceRequest(instanceId=iid, name="chain"),
                       timeout=30).instanceId


def wait_all_completed(address: str, ids: list[str], timeout: float) -> None:
    with grpc.insecure_channel(address) as channel:
        client = TaskHubClient(channel)
        end = time.monotonic() + timeout
        pending = set(ids)
        while pending:
            for iid in sorted(pending):
                st = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid), timeout=10)
                if st.exists and st.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED:
                    pending.discard(iid)
            if pending and time.monotonic() > end:
                raise AssertionError(f"{len(pending)} instances never completed, e.g. {sorted(pending)[:5]}")
            if pending:
                time.sleep(0.1)


def assert_exact_chains(address: str, ids: list[str]) -> None:
    """Each instance: COMPLETED with "3"; exactly 3 TaskScheduled (ids 1,2,3) and exactly 3
    TaskCompleted (taskScheduledIds 1,2,3, results "0","1","2"): none lost, none twice."""
    problems: list[str] = []
    with grpc.insecure_channel(address) as channel:
        client = TaskHubClient(channel)
        for iid in ids:
            st = client.call("GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True),
                             timeout=10)
            if (st.workflowState.workflowStatus, st.workflowState.output.value) != (
                    pb.ORCHESTRATION_STATUS_COMPLETED, str(STEPS)):
                problems.append(f"{iid}: status {st.workflowState.workflowStatus}, output "
                                f"{st.workflowState.output.value!r}")
                continue
            hist = client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid), timeout=10).events
            scheduled = sorted(e.eventId for e in hist if e.HasField("taskScheduled"))
            done = [(e.taskCompleted.taskScheduledId, e.taskCompleted.result.value)
                    for e in hist if e.HasField("taskCompleted")]
            k = kinds(hist)
            if scheduled != [1, 2, 3]:
                problems.append(f"{iid}: TaskScheduled ids {scheduled}")
            if sorted(done) != [(1, "0"), (2, "1"), (3, "2")]:
                problems.append(f"{iid}: TaskCompleted {done}")
            if k.count("ExecutionStarted") != 1 or k.count("ExecutionCompleted") != 1:
                problems.append(f"{iid}: history {k}")
    assert not problems, f"{len(problems)} of {len(ids)} instances are wrong:\n" + "\n".join(problems[:20])


# ----------------------------------------------------------------------------- the tests

@pytest.mark.slow
def test_kill_9_mid_run_loses_nothing_and_duplicates_nothing(tmp_path: Path, processes) -> None:
    db = tmp_path / "s.db"
    sidecar = launch(processes, db)
    worker = ChainWorker(sidecar.address, activity_delay=0.01)
    worker.start()
    pool = ThreadPoolExecutor(max_workers=20)
    ids = [f"chain-{i:03d}" for i in range(100)]
    try:
        with grpc.insecure_channel(sidecar.address) as channel:
            client = TaskHubClient(channel)
            starts = [pool.submit(_start, client, iid) for iid in ids]
            assert sorted(f.result(timeout=60) for f in starts) == ids
        wait_for(lambda: worker.acked >= 100, "a third of the activities", timeout=60)
        sidecar.kill9()
        acked_at_kill = worker.acked
        assert acked_at_kill < 100 * STEPS, "everything finished before the kill; the test proved nothing"

        sidecar = relaunch(processes, db, sidecar.port)
        worker.address = sidecar.address
        wait_all_completed(sidecar.address, ids, timeout=60)
        assert worker.connects >= 2, "the worker never reconnected"
        assert not worker.errors, worker.errors
        assert_exact_chains(sidecar.address, ids)
    finally:
        worker.stop()
        pool.shutdown(wait=False, cancel_futures=True)


@pytest.mark.slow
def test_kill_9_right_after_activity_results_are_acknowledged(tmp_path: Path, processes) -> None:
    """CompleteActivityTask returned OK -> after kill -9 and restart the result is in history
    exactly once, and the activity is not run again."""
    db = tmp_path / "s.db"
    sidecar = launch(processes, db)
    ids = [f"ack-{i:02d}" for i in range(20)]
    raw = RawWorker(sidecar.address)
    items = Sorter(raw)
    pool = ThreadPoolExecutor(max_workers=len(ids))
    try:
        with grpc.insecure_channel(sidecar.address) as channel:
            client = TaskHubClient(channel)
            starts = [pool.submit(_start, client, iid) for iid in ids]
            for _ in ids:
                raw.answer(items.next("workflowRequest"), schedule(1, "step", "0"))
            assert sorted(f.result(timeout=30) for f in starts) == ids
        acts = [items.next("activityRequest") for _ in ids]
        assert sorted(a.activityRequest.workflowInstance.instanceId for a in acts) == ids
        for act in acts:
            raw.complete_activity(act, act.activityRequest.input.value)  # returned: acknowledged
        sidecar.kill9()
    finally:
        raw.cancel()
        pool.shutdown(wait=False, cancel_futures=True)

    sidecar = relaunch(processes, db, sidecar.port)
    worker = ChainWorker(sidecar.address)
    worker.start()
    try:
        wait_all_completed(sidecar.address, ids, timeout=60)
        rerun = sorted((iid, task) for iid, task, _ in worker.activities if task == 1)
        assert rerun == [], f"acknowledged activities were dispatched again after the restart: {rerun[:10]}"
        assert worker.first_turns == [], "first turns, already committed, were run again"
        assert not worker.errors, worker.errors
        assert_exact_chains(sidecar.address, ids)
    finally:
        worker.stop()


@pytest.mark.slow
def test_kill_9_right_after_turns_are_acknowledged(tmp_path: Path, processes) -> None:
    """CompleteWorkflowTask returned OK (StartInstance returned) -> after kill -9 and restart the
    turn is not run again, its TaskScheduled is recorded once, and the activity is dispatched."""
    db = tmp_path / "s.db"
    sidecar = launch(processes, db)
    ids = [f"turn-{i:02d}" for i in range(20)]
    raw = RawWorker(sidecar.address)
    items = Sorter(raw)
    pool = ThreadPoolExecutor(max_workers=len(ids))
    try:
        with grpc.insecure_channel(sidecar.address) as channel:
            client = TaskHubClient(channel)
            starts = [pool.submit(_start, client, iid) for iid in ids]
            for _ in ids:
                raw.answer(items.next("workflowRequest"), schedule(1, "step", "0"))
            assert sorted(f.result(timeout=30) for f in starts) == ids
        sidecar.kill9()
    finally:
        raw.cancel()
        pool.shutdown(wait=False, cancel_futures=True)

    sidecar = relaunch(processes, db, sidecar.port)
    worker = ChainWorker(sidecar.address)
    worker.start()
    try:
        wait_all_completed(sidecar.address, ids, timeout=60)
        assert worker.first_turns == [], "first turns, already committed, were run again"
        ones = sorted(iid for iid, task, _ in worker.activities if task == 1)
        assert ones == ids, "each pending activity 1 is dispatched exactly once after the restart"
        assert not worker.errors, worker.errors
        assert_exact_chains(sidecar.address, ids)
    finally:
        worker.stop()


def test_restart_on_a_db_with_pending_work_loads(tmp_path: Path, background) -> None:
    """In-process and quick: a db holding a pending activity and a queued turn must load."""
    db = str(tmp_path / "pending.db")
    srv = SidecarServer.start(port=0, db=db)
    worker = RawWorker(srv.address)
    channel = grpc.insecure_channel(srv.address)
    try:
        client = TaskHubClient(channel)
        items = Sorter(worker)
        fut = background.submit(_start, client, "p1")
        worker.answer(items.next("workflowRequest"), schedule(1, "step", "0"))
        assert fut.result(timeout=10) == "p1"
        background.submit(_start, client, "p2")  # its first turn stays out, unanswered
        items.next("workflowRequest")
    finally:
        worker.cancel()
        channel.close()
        srv.stop()
    try:
        again = SidecarServer.start(port=0, db=db)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"SidecarServer.start on a db with pending work raised {exc!r}")
    worker = RawWorker(again.address)
    try:
        got = {worker.next(timeout=10).WhichOneof("request") for _ in range(2)}
        assert got == {"activityRequest", "workflowRequest"}
    finally:
        worker.cancel()
        again.stop()
