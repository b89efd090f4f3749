"""Workers under test: each answers a turn (instance id, past, new) with a WorkflowResponse.

- `ReferenceWorker`: the pure executor in this process (the reference answer);
- `FunctionWorker`: any in-process answer function, e.g. a mutant that post-processes the
  reference's TurnResult (tests/mutants/variants.py);
- `SubprocessReference`: the pure executor in a fresh Python process (another hash seed), for
  "the same answer on a fresh process";
- `DriverWorker`: a worker target (an SDK driver, a command) started by the harness against an
  in-process reference sidecar; each turn reaches it through `engine.inject_turn` (the reference
  sidecar hands the turn to the connected worker and returns its answer without applying it).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from taskhub_programs import Bundle
from taskhub_wire import pb

from conformance.dialects.history import NATIVE, Dialect
from conformance.dialects.turn import TurnCase
from conformance.targets.reference import TurnResult, execute

INJECT_TIMEOUT_S = 10.0  # the longest a driver is waited for, on a fresh process, before "no answer"
SPIN_WINDOW_S = 0.3  # how long a silent process's threads are watched before it is kept
SPIN_SAMPLES = 10  # ... in this many looks; a thread runnable in SPIN_SHARE of them is looping
SPIN_SHARE = 0.8


def process_tree(pid: int) -> list[int]:
    """`pid` first, then every process under it (a driver command may be a launcher of the real process)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(parents.get(p, ()))
    return found


def _runnable_threads(pids: Sequence[int]) -> set[tuple[int, str]]:
    """The (pid, thread id) of every thread of `pids` that is running or waiting for a CPU (state R)."""
    out = set()
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                if open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[0] == "R":
                    out.add((pid, tid))
            except (OSError, IndexError):
                continue
    return out


def looping(pid: int, *, window: float = SPIN_WINDOW_S, samples: int = SPIN_SAMPLES) -> bool | None:
    """Whether a thread of `pid` (or of a process under it) stays runnable through `window`: a thread
    looping on a turn it will never answer. Read from the threads' scheduler state, not their CPU
    time, so a loaded machine (where a looping thread gets a sliver of a core) does not hide it.
    None when /proc cannot tell (no such process, no /proc)."""
    if not Path(f"/proc/{pid}").exists():
        return None
    pids = process_tree(pid)
    counts: dict[tuple[int, str], int] = {}
    for k in range(samples):
        for key in _runnable_threads(pids):
            counts[key] = counts.get(key, 0) + 1
        if k + 1 < samples:
            time.sleep(window / samples)  # looks spread over the window, not a wait for a condition
    return any(n >= SPIN_SHARE * samples for n in counts.values())


class Latency:
    """The answer times of one driver process in this run. A hang is judged against them (many
    times the slowest recent answer), not against a fixed wait: a driver that answers in 20 ms is
    not waited on for 10 s before its turn goes to a fresh process. Until enough answers are
    seen (warm-up), and never beyond, the wait is `cap`."""

    WARM = 20  # answers seen before the driver's own times are trusted

    def __init__(self, *, cap: float) -> None:
        self.cap = cap
        self._times: deque[float] = deque(maxlen=200)
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self._times.append(seconds)

    def slowest(self) -> float | None:
        """The 99th percentile of the recent answer times (None during warm-up)."""
        with self._lock:
            if len(self._times) < self.WARM:
                return None
            times = sorted(self._times)
        return times[min(len(times) - 1, int(0.99 * len(times)))]

    def patience(self, *, factor: float, floor: float) -> float:
        slow = self.slowest()
        return self.cap if slow is None else min(self.cap, max(floor, factor * slow))


class WorkerUnderTest(Protocol):
    name: str

    def answer(self, case: TurnCase) -> pb.WorkflowResponse | None: ...

    def restart(self) -> None: ...

    def close(self) -> None: ...


def reference_answer(bundle: Bundle, case: TurnCase) -> pb.WorkflowResponse:
    result = case.answer if case.answer is not None else execute(bundle, instance_id=case.instance_id,
                                                                 past=case.past, new=case.new)
    return result.response(instance_id=case.instance_id, completion_token="")


class ReferenceWorker:
    name = "reference"

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    def answer(self, case: TurnCase) -> pb.WorkflowResponse:
        result = execute(self.bundle, instance_id=case.instance_id, past=case.past, new=case.new)
        return result.response(instance_id=case.instance_id, completion_token="")

    def restart(self) -> None:
        return None

    def close(self) -> None:
        return None


class FunctionWorker:
    """An in-process worker: `transform(answer, history) -> answer` applied to the reference's answer to the
    turn whose events (past, then new) are `history` (the shape of tests/mutants/variants.py's mutations)."""

    def __init__(self, bundle: Bundle, transform: Callable[[TurnResult, Sequence[pb.HistoryEvent]], TurnResult], *,
                 name: str) -> None:
        self.bundle, self.transform, self.name = bundle, transform, name

    def answer(self, case: TurnCase) -> pb.WorkflowResponse:
        result = self.transform(execute(self.bundle, instance_id=case.instance_id, past=case.past, new=case.new),
                                [*case.past, *case.new])
        return result.response(instance_id=case.instance_id, completion_token="")

    def restart(self) -> None:
        return None

    def close(self) -> None:
        return None


def _b64(events: Sequence[pb.HistoryEvent]) -> list[str]:
    return [base64.b64encode(e.SerializeToString()).decode() for e in events]


class SubprocessReference:
    """The reference executor in a fresh process (`python -m conformance.fuzz.replay_worker`)."""

    name = "reference (fresh process)"

    def __init__(self, bundle_doc: Mapping[str, Any], *, hash_seed: int = 12345) -> None:
        self.bundle_doc = dict(bundle_doc)
        self.hash_seed = hash_seed

    def answer_many(self, cases: Sequence[TurnCase]) -> list[pb.WorkflowResponse | None]:
        if not cases:
            return []
        lines = [json.dumps({"programs": self.bundle_doc})]
        lines += [json.dumps({"iid": c.instance_id, "past": _b64(c.past), "new": _b64(c.new)}) for c in cases]
        env = dict(os.environ, PYTHONHASHSEED=str(self.hash_seed))
        root = Path(__file__).resolve().parents[2]
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
        done = subprocess.run([sys.executable, "-m", "conformance.fuzz.replay_worker"], input="\n".join(lines),
                              capture_output=True, text=True, env=env, timeout=300, cwd=str(root))
        if done.returncode != 0:
            raise RuntimeError(f"the fresh-process reference worker failed (exit {done.returncode}):\n"
                               f"{done.stderr[-2000:]}")
        out: list[pb.WorkflowResponse | None] = []
        for line in done.stdout.splitlines():
            out.append(pb.WorkflowResponse.FromString(base64.b64decode(line)) if line else None)
        return out


class DriverWorker:
    """A worker target (SDK driver) connected to an in-process reference sidecar, fed with inject_turn."""

    def __init__(self, target: Any, bundle: Bundle, bundle_doc: Mapping[str, Any], *,
                 work_dir: Path | None = None, timeout: float = INJECT_TIMEOUT_S, dialect: Dialect = NATIVE) -> None:
        from conformance.targets.reference import start_reference_sidecar

        self.target, self.bundle, self.bundle_doc = target, bundle, dict(bundle_doc)
        self.dialect = dialect
        self.name = target.name
        self.timeout = timeout
        self._own_dir = work_dir is None  # a folder of its own is removed on close
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="conformance-fuzz-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.sidecar = start_reference_sidecar(options={}, work_dir=self.work_dir)
        self.handle: Any = None
        self.starts = 0
        self.silent = 0  # turns never answered
        self.transient = 0  # turns answered only on a second try (by a fresh process)
        self.refused: dict[str, str] = {}  # programs the target cannot express -> its message
        self.unechoed = 0  # answers that came back without the work item's completion token
        self.timeouts = 0  # waits that ended without an answer
        self.latency = Latency(cap=timeout)
        self.start_s = 0.0  # seconds spent starting this driver's processes
        self.kept = 0  # silent processes found still answering, so not restarted
        self.answered_at = 0.0  # perf_counter of this driver's latest answer
        self._restart_lock = threading.Lock()
        try:
            self._start_pruning()
        except BaseException:
            self.sidecar.stop()
            raise

    def _start_pruning(self) -> None:
        """Start the target; programs it refuses (a step its SDK cannot express) leave the pool."""
        from conformance.targets.base import CannotExpress
        from taskhub_programs import parse_bundle

        for _ in range(30):
            try:
                self._start()
                return
            except CannotExpress as exc:
                # The driver names every step it refuses on stderr; the exception only the last one.
                logs = sorted(self.work_dir.glob("*.stderr.log"), key=lambda p: p.stat().st_mtime)
                text = str(exc) + (logs[-1].read_text(encoding="utf-8", errors="replace") if logs else "")
                names = set(re.findall(r"\$\.programs\.([A-Za-z0-9_]+)", text))
                if not names or not names & set(self.bundle_doc):
                    raise
                gone = set(names)
                for name, body in self.bundle_doc.items():  # callers of a refused child go too
                    if any(f'"workflow": "{child}"' in json.dumps(body) for child in names):
                        gone.add(name)
                for name in gone:
                    self.refused[name] = str(exc).splitlines()[-1][:300]
                    self.bundle_doc.pop(name, None)
                if not any(n.startswith("p") for n in self.bundle_doc):
                    raise
                self.bundle = parse_bundle({"programs": self.bundle_doc})
        self._start()

    def _start(self) -> None:
        from conformance.targets.base import WorkerStart

        self.starts += 1
        began = time.perf_counter()
        try:
            self.handle = self.target.start(WorkerStart(
                address=self.sidecar.address, bundle=self.bundle, bundle_doc=self.bundle_doc, work_dir=self.work_dir,
                ledger=self.work_dir / "ledger.jsonl"))
        finally:
            self.start_s += time.perf_counter() - began

    def alive(self) -> bool:
        proc = getattr(self.handle, "proc", None)
        return proc is None or proc.is_running()

    def try_answer(self, case: TurnCase, *, timeout: float) -> pb.WorkflowResponse | None:
        """One attempt: the worker's answer to `case` within `timeout` seconds, or None (no retry).
        Safe to call from several threads at once: the sidecar matches answers to turns by token."""
        sent = self.dialect.to_worker(case)
        began = time.perf_counter()
        resp = self.sidecar.engine.inject_turn(instance_id=sent.instance_id, past=sent.past, new=sent.new,
                                               timeout=timeout)
        if resp is None:
            self.timeouts += 1
            return None
        self.answered_at = time.perf_counter()
        self.latency.add(self.answered_at - began)
        if not resp.completionToken.startswith("vector-"):
            self.unechoed += 1  # matched by instance id (a worker without the token field)
        return self.dialect.from_worker(resp, case)

    def answer(self, case: TurnCase) -> pb.WorkflowResponse | None:
        """The worker's answer to `case` (None: none in time, twice: the second time on a fresh
        process, waited for longer). Safe to call from several threads at once."""
        handle = self.handle
        if not self.alive():
            self._restart_if(handle)
        handle = self.handle
        got = self.try_answer(case, timeout=self.latency.patience(factor=10, floor=0.5))
        if got is None:
            # No answer: once more on a fresh driver process, so that a slow machine is not a finding.
            self._restart_if(handle, wedged=True)
            handle = self.handle
            got = self.try_answer(case, timeout=self.latency.patience(factor=40, floor=2.0))
            if got is None:
                self.silent += 1
                self._restart_if(handle, wedged=True)  # a wedged driver: a fresh one for the next turn
            else:
                self.transient += 1
        return got

    def still_answering(self, *, sent: float, probe: TurnCase | None) -> bool:
        """Whether the process left a turn sent at `sent` unanswered but still works: no thread looping
        (`looping`: one spinning on the lost turn would keep a core busy for good), and it answered
        another turn since that one was sent, or answers `probe` now. An SDK that drops one turn (an
        exception in its own error path) is kept, not replaced: a JVM's start-up costs seconds of CPU."""
        pid = getattr(getattr(self.handle, "proc", None), "pid", None)
        if pid is None or not self.alive() or looping(pid) is not False:
            return False
        if self.answered_at > sent:
            return True
        return probe is not None and self.try_answer(
            probe, timeout=self.latency.patience(factor=10, floor=0.5)) is not None

    def _restart_if(self, handle: Any, *, wedged: bool = False) -> None:
        """Restart the driver unless another thread already did since `handle` was current."""
        with self._restart_lock:
            if self.handle is handle:
                self.restart(wedged=wedged)

    def stderr_tail(self) -> str:
        proc = getattr(self.handle, "proc", None)
        try:
            return proc.stderr_tail() if proc is not None else ""
        except OSError:
            return ""

    def restart(self, *, wedged: bool = False) -> None:
        self.stop_worker(wedged=wedged)
        self._start()

    def stop_worker(self, *, wedged: bool = False) -> None:
        """Stop the driver process: asked to exit, or, `wedged` (it stopped answering), killed at once
        (a process that answers nothing would only be waited on for its exit too)."""
        proc = getattr(self.handle, "proc", None)
        if wedged and proc is not None and hasattr(proc, "kill"):
            try:
                proc.kill()
            except OSError:
                pass
        if self.handle is not None:
            try:
                self.handle.stop()
            except Exception:  # noqa: BLE001 - a driver that fails to stop is killed by its handle
                pass
            self.handle = None

    def close(self) -> None:
        """Stop the driver and the sidecar, and remove the work folder this worker made (its drivers'
        logs: a finding has already copied the stderr it needs, `stderr_tail`)."""
        try:
            self.stop_worker()
            self.sidecar.stop()
        finally:
            if self._own_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "DriverWorker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class DriverPool:
    """Several processes of one worker target, each on its own stream (and in-process sidecar):
    turns of one history go to one of them, replays of it to the others at the same time, so the
    fuzzer checks "the same answer in a fresh process" without re-spawning a process per example.

    `concurrency`: turns in flight at once on one stream (1 for a worker that answers without the
    completion token: the sidecar could not tell two of its answers apart).

    A turn not answered in time (judged against the process's own answer times, `Latency`) goes at
    once to another stream's warm process, waited for longer unless the first process answered other
    turns meanwhile (it dropped that one); the silent process is checked in the background and replaced
    only if it is stuck (`DriverWorker.still_answering`), its turns going to the other streams meanwhile:
    no turn waits for a process to start, and a hang costs one patient wait, not two plus two start-ups."""

    def __init__(self, make: Callable[[], DriverWorker], *, streams: int = 2, concurrency: int = 8) -> None:
        self.workers: list[DriverWorker] = []
        with ThreadPoolExecutor(max_workers=streams) as ex:
            futures = [ex.submit(make) for _ in range(max(1, streams))]
            errors = []
            for f in futures:
                try:
                    self.workers.append(f.result())
                except Exception as exc:  # noqa: BLE001 - close the others, then report the first
                    errors.append(exc)
        if errors:
            self.close()
            raise errors[0]
        self.name = self.workers[0].name
        self.concurrency = max(1, concurrency)
        self._pool = ThreadPoolExecutor(max_workers=len(self.workers) * self.concurrency,
                                        thread_name_prefix="fuzz-turn")
        # Turns sent ahead (replays) have threads of their own, so they never hold up a turn the
        # schedule waits for; the slots let the latter in first.
        self._ahead = ThreadPoolExecutor(max_workers=len(self.workers) * self.concurrency,
                                         thread_name_prefix="fuzz-ahead")
        self._slots = [Slots(self.concurrency) for _ in self.workers]
        self._down: dict[int, threading.Thread] = {}  # streams whose process is being replaced
        self._down_lock = threading.Lock()
        self._probe: TurnCase | None = None  # a turn every process answers quickly (the first warm-up turn)
        self.silent = 0  # turns no process answered
        self.transient = 0  # turns answered only by another process
        self.failovers = 0

    @property
    def streams(self) -> int:
        return len(self.workers)

    @property
    def refused(self) -> dict[str, str]:
        return self.workers[0].refused

    @property
    def bundle(self) -> Bundle:
        return self.workers[0].bundle

    @property
    def bundle_doc(self) -> dict[str, Any]:
        return self.workers[0].bundle_doc

    @property
    def unechoed(self) -> int:
        return sum(w.unechoed for w in self.workers)

    def _live(self, stream: int) -> int:
        """`stream`, or the next one whose process is not being replaced (waits when all are)."""
        n = len(self.workers)
        with self._down_lock:
            for k in range(n):
                if (stream + k) % n not in self._down:
                    return (stream + k) % n
            thread = self._down.get(stream)
        if thread is not None:
            thread.join()
        return stream

    def _replace(self, stream: int, handle: Any, *, sent: float | None = None) -> None:
        """Restart the process of `stream` in the background (unless already done since `handle`);
        after a silent turn sent at `sent`, only if the process does not still answer. Its turns go
        to the other streams meanwhile."""
        worker = self.workers[stream]

        def run() -> None:
            try:
                if sent is not None and worker.handle is handle and worker.still_answering(sent=sent,
                                                                                            probe=self._probe):
                    worker.kept += 1
                    return
                worker._restart_if(handle, wedged=True)
            finally:
                with self._down_lock:
                    self._down.pop(stream, None)

        with self._down_lock:
            if stream in self._down or worker.handle is not handle:
                return
            thread = threading.Thread(target=run, name=f"fuzz-restart-{stream}", daemon=True)
            self._down[stream] = thread
        thread.start()

    def answer(self, case: TurnCase, *, stream: int = 0, urgent: bool = True) -> pb.WorkflowResponse | None:
        """The answer of `stream`'s process (or of another one when it is silent); `urgent`: a turn
        the caller waits for, sent before any turn sent ahead (`submit_many`) on that stream."""
        if len(self.workers) == 1:
            with self._slots[0].held(urgent=urgent):
                return self.workers[0].answer(case)
        stream = self._live(stream)
        worker = self.workers[stream]
        handle = worker.handle
        if not worker.alive():
            self._replace(stream, handle)
            stream = self._live(stream)
            worker, handle = self.workers[stream], self.workers[stream].handle
        with self._slots[stream].held(urgent=urgent):
            sent = time.perf_counter()
            got = worker.try_answer(case, timeout=worker.latency.patience(factor=10, floor=0.5))
        if got is not None:
            return got
        # Silent: a fresh process (another stream's, warm; it never saw this instance) gets the
        # turn at once, waited for longer, while this one is checked and replaced if it is stuck.
        self._replace(stream, handle, sent=sent)
        self.failovers += 1
        # A process that answered other turns while this one waited (ten times its slowest recent answer)
        # was not starved of CPU: it dropped this turn, and the other process is waited for as patiently
        # as the first was, not four times longer.
        dropped = worker.answered_at > sent
        other = self._live((stream + 1) % len(self.workers))
        helper = self.workers[other]
        handle = helper.handle
        with self._slots[other].held(urgent=urgent):
            sent = time.perf_counter()
            got = helper.try_answer(case, timeout=helper.latency.patience(factor=10, floor=0.5) if dropped
                                    else helper.latency.patience(factor=40, floor=2.0))
        if got is None:
            self.silent += 1
            helper.silent += 1
            self._replace(other, handle, sent=sent)
        else:
            self.transient += 1
            helper.transient += 1
        return got

    def warm_up(self, cases: Sequence[TurnCase]) -> int:
        """Every case on every stream at once (answers thrown away); returns the turns sent."""
        jobs = [(i, c) for i in range(len(self.workers)) for c in cases]
        answers = self.answer_many(jobs)
        self._probe = next((c for c, a in zip(cases, answers) if a is not None), None)
        return len(jobs)

    def counters(self) -> dict[str, float]:
        """What the processes cost: start-ups, their seconds, waits that timed out, failovers."""
        return {"starts": sum(w.starts for w in self.workers), "start_s": sum(w.start_s for w in self.workers),
                "timeouts": sum(w.timeouts for w in self.workers), "failovers": self.failovers,
                "silent": self.silent, "kept": sum(w.kept for w in self.workers)}

    def submit_many(self, jobs: Sequence[tuple[int, TurnCase]]) -> list[Future[pb.WorkflowResponse | None]]:
        """(stream, turn) pairs sent at once (up to `concurrency` in flight per stream, the rest
        queued in order); the futures of their answers, for a caller with other work meanwhile."""
        return [self._ahead.submit(self.answer, case, stream=i % len(self.workers), urgent=False) for i, case in jobs]

    def answer_many(self, jobs: Sequence[tuple[int, TurnCase]]) -> list[pb.WorkflowResponse | None]:
        """Answers to (stream, turn) pairs, all in flight at once (up to `concurrency` per stream),
        ahead of any turn sent with `submit_many`."""
        futures = [self._pool.submit(self.answer, case, stream=i % len(self.workers)) for i, case in jobs]
        return [f.result() for f in futures]

    def alive(self, stream: int = 0) -> bool:
        return self.workers[stream].alive()

    def stderr_tail(self) -> str:
        return self.workers[0].stderr_tail()

    def restart(self) -> None:
        for w in self.workers:
            w.restart()

    def close(self) -> None:
        for name in ("_ahead", "_pool"):
            pool = getattr(self, name, None)
            if pool is not None:
                pool.shutdown(wait=True)
        with getattr(self, "_down_lock", threading.Lock()):
            restarting = list(getattr(self, "_down", {}).values())
        for thread in restarting:
            thread.join()
        if len(self.workers) > 1:  # each driver's own shutdown takes a while: all of them at once
            with ThreadPoolExecutor(max_workers=len(self.workers)) as ex:
                list(ex.map(lambda w: w.close(), self.workers))
        else:
            for w in self.workers:
                w.close()


class Slots:
    """Turns in flight on one stream, at most `limit`; a waiting urgent turn goes before any other."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._busy = 0
        self._urgent_waiting = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def held(self, *, urgent: bool) -> Iterator[None]:
        with self._cond:
            self._urgent_waiting += urgent
            try:
                while self._busy >= self.limit or (not urgent and self._urgent_waiting):
                    self._cond.wait()
            finally:
                self._urgent_waiting -= urgent
            self._busy += 1
            if urgent:  # turns held back only for this one may go if a slot is left
                self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()


def wait_until(pred: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()
