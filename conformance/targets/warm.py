"""Driver JVMs kept warm across a run's scenarios (a target's `serve:` command, e.g. durabletask-java).

A fresh driver process per scenario spends seconds of a JVM's start-up each time. A target that declares
`serve:` instead gets a pool of long-lived driver processes for the run (`warm_workers`), as many as the
run's jobs; each scenario's worker is a session on one of them (the driver's control protocol:
drivers/durabletask_java/src/main/java/taskhub/driver/Serve.java), which writes the same lines to the
scenario's own stdout and stderr files a fresh driver would.

No verdict depends on the pool: a serve process that misbehaves (dies, does not answer, keeps threads of a
stopped session) is ended by its pid and replaced, and the scenario that met it gets a fresh driver
process. Without a pool (`--fresh-workers`, or code that runs scenarios outside `warm_workers`) every
worker is a fresh process, as before.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.reporting.logs import adopt_files
from conformance.targets.base import WorkerStart
from conformance.targets.external import (EXIT_CANNOT_EXPRESS, cannot_express, driver_path, start_command_worker,
                                          write_bundle)
from conformance.targets.process import (ManagedProcess, ProcessExitedError, ProcessSpec, create_log_files, describe,
                                         file_tail)

log = logging.getLogger(__name__)

_SERVING = re.compile(r"^serving on (127\.0\.0\.1:[0-9]+)$")
_SERVE_START_S = 60.0  # a cold JVM on a loaded machine
_PING_S = 5.0
_STOP_S = 15.0  # the session waits up to 5 s for its threads, after up to 2 s for its channel
_READY_S = 60.0  # the harness's wait for a fresh driver's ready line (conformance/targets/external.py)
_DRIVER_READY_S = 30.0  # the driver's own wait for its work-item stream (its --ready-timeout default)


class ServeError(RuntimeError):
    """A serve process did not behave: it is ended and replaced, and its scenario gets a fresh driver."""


class Served:
    """One serve process and its control connection (one request at a time)."""

    def __init__(self, *, name: str, argv: Sequence[str], log_dir: Path, env: Mapping[str, str] | None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.process = ManagedProcess.start(spec=ProcessSpec(name=f"{name}-serve", argv=tuple(argv), log_dir=log_dir,
                                                             env=env, cwd=cwd))
        try:
            address = self.process.wait_for_line(_SERVING, timeout=_SERVE_START_S).group(1)
            host, _, port = address.rpartition(":")
            self._sock = socket.create_connection((host, int(port)), timeout=_SERVE_START_S)
        except BaseException:
            self.process.kill()
            raise
        self._reader = self._sock.makefile("r", encoding="utf-8")
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self.process.pid

    def call(self, request: Mapping[str, Any], *, timeout: float) -> dict[str, Any]:
        """The answer to `request`; ServeError if the process does not give one within `timeout` seconds."""
        with self._lock:
            try:
                self._sock.settimeout(timeout)
                self._sock.sendall((json.dumps(request) + "\n").encode())
                line = self._reader.readline()
            except OSError as exc:
                raise ServeError(f"{self.name} serve process (pid {self.pid}) did not answer {request.get('op')!r}: "
                                 f"{exc}") from None
        if not line:
            raise ServeError(f"{self.name} serve process (pid {self.pid}) closed its control connection "
                             f"(exit status {self.process.returncode})")
        try:
            answer = json.loads(line)
        except ValueError:
            raise ServeError(f"{self.name} serve process (pid {self.pid}) answered {line[:200]!r}") from None
        if not isinstance(answer, dict):
            raise ServeError(f"{self.name} serve process (pid {self.pid}) answered {line[:200]!r}")
        return answer

    def answers(self) -> bool:
        try:
            return self.call({"op": "ping"}, timeout=_PING_S).get("ok") is True
        except ServeError:
            return False

    def end(self) -> None:
        """Close the control connection (the process exits on it) and stop the process by its pid."""
        try:
            self._reader.close()
            self._sock.close()
        except OSError:
            pass
        self.process.stop(timeout=5)


class Pool:
    """Up to `size` serve processes of one target; `take` hands out an idle one, `give_back` or `retire` ends
    its turn. Processes are started and ended on the pool's own threads, so no scenario's log adopts their
    output (conformance/reporting/logs.py adopts files per scenario thread)."""

    def __init__(self, *, name: str, argv: Sequence[str], size: int, log_dir: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name, self._argv, self._size, self._log_dir = name, tuple(argv), max(1, size), log_dir
        self._env, self._cwd = env, cwd
        self._idle: list[Served] = []
        self._busy: set[Served] = set()
        self._starting = 0
        self._closed = False
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self.handed_out = 0  # sessions started on the pool's processes
        self.retired = 0  # processes ended for misbehaving
        for _ in range(self._size):
            self._spawn()

    def _spawn(self) -> None:
        """Start one more process in the background (the caller holds no lock, or the condition)."""
        with self._cond:
            if self._closed or len(self._idle) + len(self._busy) + self._starting >= self._size:
                return
            self._starting += 1
        thread = threading.Thread(target=self._start_one, name=f"warm-{self.name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _start_one(self) -> None:
        served = None
        try:
            served = Served(name=self.name, argv=self._argv, log_dir=self._log_dir, env=self._env, cwd=self._cwd)
        except Exception as exc:  # noqa: BLE001 - the scenarios then get fresh processes; said once here
            log.warning("%s: a serve process did not start (%s); its scenarios run on fresh processes", self.name, exc)
        with self._cond:
            self._starting -= 1
            if served is not None and self._closed:
                pass  # ended below, outside the lock
            elif served is not None:
                self._idle.append(served)
                served = None
            self._cond.notify_all()
        if served is not None:
            served.end()

    def take(self) -> Served | None:
        """An idle process that answers, waiting for one being started; None when every one is busy (or none
        starts): the caller runs a fresh process instead."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._idle or not self._starting or self._closed,
                                    timeout=_SERVE_START_S)
                if self._closed or not self._idle:
                    return None
                served = self._idle.pop()
                self._busy.add(served)
            if served.answers():
                with self._cond:
                    self.handed_out += 1
                return served
            self.retire(served, why="it did not answer a ping")

    def give_back(self, served: Served) -> None:
        with self._cond:
            self._busy.discard(served)
            if not self._closed:
                self._idle.append(served)
                self._cond.notify_all()
                return
        served.end()

    def retire(self, served: Served, *, why: str) -> None:
        """End a process that misbehaved (by its pid) and start another in its place."""
        log.warning("%s: serve process pid %d retired: %s", self.name, served.pid, why)
        with self._cond:
            self._busy.discard(served)
            self.retired += 1
        threading.Thread(target=served.end, name=f"warm-{self.name}-end", daemon=True).start()
        self._spawn()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            ending, self._idle = self._idle + list(self._busy), []
            self._busy.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=_SERVE_START_S + 10)
        for served in ending:
            served.end()

    def pids(self) -> list[int]:
        with self._cond:
            return [s.pid for s in self._idle + list(self._busy)]


_POOLS: dict[str, Pool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(name: str) -> Pool | None:
    with _POOLS_LOCK:
        return _POOLS.get(name)


@contextmanager
def using(pools: Mapping[str, Pool]) -> Iterator[None]:
    """Workers of these targets (name -> pool) start on the pools' processes while the block runs."""
    with _POOLS_LOCK:
        before = {name: _POOLS.get(name) for name in pools}
        _POOLS.update(pools)
    try:
        yield
    finally:
        with _POOLS_LOCK:
            for name, pool in before.items():
                if pool is None:
                    _POOLS.pop(name, None)
                else:
                    _POOLS[name] = pool


@contextmanager
def warm_workers(pairs: Sequence[Any], *, jobs: int, enabled: bool = True) -> Iterator[dict[str, Pool]]:
    """For the run of `pairs`: a pool of `jobs` serve processes per worker target that declares `serve:`;
    every process is ended by its pid when the block ends."""
    from conformance.library import find_library

    wanted = {p.worker.name: p.worker for p in pairs if enabled and getattr(p.worker, "serve", "")}
    if not wanted:
        yield {}
        return
    root = find_library().root
    with tempfile.TemporaryDirectory(prefix="conformance-warm-") as tmp:
        pools: dict[str, Pool] = {}
        try:
            for name, target in wanted.items():
                argv = [a.format(root=root) for a in shlex.split(target.serve)]  # as a `command:` is split
                # As a fresh driver's (conformance/targets/external.py): the library root, our PYTHONPATH.
                pools[name] = Pool(name=name, argv=argv, size=jobs, log_dir=Path(tmp) / name,
                                   env={**os.environ, "PYTHONPATH": driver_path(root)}, cwd=root)
            with using(pools):
                yield pools
        finally:
            for pool in pools.values():
                pool.close()


@dataclass
class WarmWorker:
    """A scenario's worker: a session on a serve process of `pool`."""

    pool: Pool
    served: Served

    def stop(self) -> None:
        try:
            answer = self.served.call({"op": "stop"}, timeout=_STOP_S)
        except ServeError as exc:
            self.pool.retire(self.served, why=str(exc))
            return
        if answer.get("ok") is True:
            self.pool.give_back(self.served)
        else:
            self.pool.retire(self.served, why=f"its session did not stop: {answer.get('error')}")


def start_served_worker(spec: WorkerStart, *, name: str, command: str, ready_line: str | None = r"^connected to ",
                        install: str | None = None, ready_timeout: float = _READY_S) -> Any:
    """A session on a warm serve process of `name`'s pool; a fresh `command` process when there is no pool, no
    idle process, or the one taken misbehaves."""
    fresh = {"name": name, "command": command, "install": install, "ready_timeout": ready_timeout}
    if ready_line is not None:
        fresh["ready_line"] = ready_line
    pool = pool_for(name)
    served = pool.take() if pool is not None else None
    if served is None:
        return start_command_worker(spec, **fresh)
    try:
        _, canonical = write_bundle(spec)
        stdout, stderr, out, err = create_log_files(spec.work_dir, name)
    except BaseException:
        pool.give_back(served)  # nothing was asked of it
        raise
    out.close()
    err.close()
    adopt_files(stdout, stderr)  # into the scenario's log, as a fresh process's files
    request = {"op": "start", "sidecar": spec.address, "canonical": str(canonical), "ledger": str(spec.ledger),
               "api_token": spec.api_token or os.environ.get("DAPR_API_TOKEN") or None,
               "stdout": str(stdout), "stderr": str(stderr), "ready_timeout": min(_DRIVER_READY_S, ready_timeout)}
    began = time.monotonic()
    try:
        answer = served.call(request, timeout=ready_timeout + _STOP_S)
    except ServeError as exc:
        pool.retire(served, why=str(exc))
        log.warning("%s: %s; this scenario's worker is a fresh process", name, exc)
        return start_command_worker(spec, **fresh)
    if answer.get("ok") is True:
        line = str(answer.get("line", ""))
        if ready_line and not re.search(ready_line, line):
            WarmWorker(pool=pool, served=served).stop()
            raise ProcessExitedError(f"{name} (warm, pid {served.pid}) answered {line!r}, which does not match "
                                     f"{ready_line!r}", returncode=-1, stderr_tail=file_tail(stderr))
        return WarmWorker(pool=pool, served=served)
    if "exit" not in answer:  # the serve process failed, not the driver's refusal: a fresh one decides
        pool.retire(served, why=str(answer.get("error")))
        return start_command_worker(spec, **fresh)
    if answer.get("leak"):
        pool.retire(served, why=str(answer["leak"]))
    else:
        pool.give_back(served)
    code, tail = int(answer["exit"]), file_tail(stderr)
    if code == EXIT_CANNOT_EXPRESS:
        raise cannot_express(name, tail)
    raise ProcessExitedError(
        describe(f"{name} exited with code {code} before printing a line matching {ready_line!r}",
                 f"(a session of the warm driver pid {served.pid}, {time.monotonic() - began:.1f}s)",
                 stdout=stdout, stderr=stderr, stderr_tail=tail),
        returncode=code, stderr_tail=tail)
