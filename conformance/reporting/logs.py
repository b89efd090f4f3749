"""Log lines of the engine, worker and adversary go to the scenario they belong to, not the terminal.

The reference pair runs in this process, several scenarios at once, so a log record is traced to
its scenario by who emitted it: the scenario's own thread (the runner emits ScenarioStarted and
ScenarioFinished on it, and the harness starts the targets from it), or an object the reference
target adopted for the scenario (its engine, server, worker) found as `self` on the emitting
thread's stack (the worker's and sidecar's pool threads are not the scenario's). What cannot be
traced goes to the run's log. Files: `<reports>/logs/<pair>/<scenario id>.log` and
`<reports>/logs/run.log`; with `-v` warnings and errors are also shown on stderr. A target that
runs as a process (an SDK driver, durabletask-go) writes its output to files, which are adopted
the same way and copied into the scenario's log when it finishes.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TextIO

from conformance.events import Event, ScenarioFinished, ScenarioStarted

FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s [%(threadName)s] %(message)s"
DATEFMT = "%H:%M:%S"

# Scenario of each running scenario thread, and of each adopted object (by id; dropped at the end
# of the run). Module state because the reference target adopts without knowing the run.
_LOCK = threading.Lock()
_THREADS: dict[int, tuple[str, str]] = {}
_OWNERS: dict[int, tuple[weakref.ref[Any], tuple[str, str]]] = {}
_FILES: dict[tuple[str, str], list[Path]] = {}
_MARKER = ".conformance-logs"  # in a logs folder this module made (and may replace)
_FILE_LINES = 2000  # the end of each process output file copied into the scenario's log


def adopt(*objects: Any) -> None:
    """Attribute the log records these objects emit to the scenario running on this thread, if any."""
    with _LOCK:
        key = _THREADS.get(threading.get_ident())
        if key is not None:
            for obj in objects:
                _OWNERS[id(obj)] = (weakref.ref(obj), key)  # weak: a finished scenario's engine is freed


def thread_scenario() -> tuple[str, str] | None:
    """The scenario this thread runs (None: none), to hand to a helper thread (`acting_for`)."""
    with _LOCK:
        return _THREADS.get(threading.get_ident())


@contextmanager
def acting_for(key: tuple[str, str] | None) -> Iterator[None]:
    """Records and files of this (helper) thread go to the scenario `key` meanwhile."""
    if key is None:
        yield
        return
    ident = threading.get_ident()
    with _LOCK:
        _THREADS[ident] = key
    try:
        yield
    finally:
        with _LOCK:
            _THREADS.pop(ident, None)


def adopt_files(*paths: Path) -> None:
    """Copy these files (a target process's stdout/stderr) into the log of the scenario running here."""
    with _LOCK:
        key = _THREADS.get(threading.get_ident())
        if key is not None:
            _FILES.setdefault(key, []).extend(paths)


def log_path(out_dir: Path, *, pair: str, scenario: str) -> Path:
    """Where a scenario's log lines are written (only when it logged something)."""
    return out_dir / "logs" / pair / f"{scenario}.log"


class ScenarioLogs(logging.Handler):
    """A root log handler that files records by scenario; also a sink for the run's events."""

    def __init__(self, *, out_dir: Path | None, verbose_stream: TextIO | None = None, fresh: bool = True) -> None:
        super().__init__(level=logging.INFO)
        self._fresh = fresh  # False in a run's child process: the parent made the folder, the others share it
        self.setFormatter(logging.Formatter(FORMAT, DATEFMT))
        self.out_dir = out_dir
        self.written: dict[tuple[str, str], Path] = {}  # (pair, scenario) -> its log file
        self._echo = verbose_stream
        self._saved: tuple[int, Any] | None = None

    # ---------------------------------------------------------------- lifecycle

    def install(self) -> "ScenarioLogs":
        if self.out_dir is not None and self._fresh:
            logs = self.out_dir / "logs"
            if (logs / _MARKER).is_file():  # a previous run's logs; never a folder of the user's
                shutil.rmtree(logs, ignore_errors=True)
            if not logs.exists():
                logs.mkdir(parents=True)
                (logs / _MARKER).write_text("log files of the last `conformance run`; replaced by the next one\n",
                                            encoding="utf-8")
        root = logging.getLogger()
        self._saved = (root.level, threading.excepthook)
        root.addHandler(self)  # a root handler also keeps logging's last-resort stderr handler silent
        root.setLevel(logging.INFO)
        threading.excepthook = self._thread_exception
        return self

    def uninstall(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        if self._saved is not None:
            root.setLevel(self._saved[0])
            threading.excepthook = self._saved[1]
        with _LOCK:
            _OWNERS.clear()
            _THREADS.clear()
            _FILES.clear()

    def __enter__(self) -> "ScenarioLogs":
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()

    def handle_event(self, event: Event) -> None:
        """The runner's sink: called on the scenario's own thread for its start and end."""
        if isinstance(event, ScenarioStarted):
            with _LOCK:
                _THREADS[threading.get_ident()] = (event.pair, event.scenario)
        elif isinstance(event, ScenarioFinished):
            with _LOCK:
                _THREADS.pop(threading.get_ident(), None)
                files = _FILES.pop((event.pair, event.scenario), [])
            self._copy_files((event.pair, event.scenario), files)

    def handle_child_event(self, event: Event) -> None:
        """The sink of a run whose scenarios ran in child processes (conformance/runner/processes.py): their
        ScenarioLogs wrote the files; a finished scenario's file, if any, is noted for the terminal."""
        if isinstance(event, ScenarioFinished) and self.out_dir is not None:
            path = log_path(self.out_dir, pair=event.pair, scenario=event.scenario)
            if path.is_file():
                self.written.setdefault((event.pair, event.scenario), path)

    def _copy_files(self, key: tuple[str, str], files: list[Path]) -> None:
        """The target processes have stopped by now (the harness stops them before the result)."""
        for path in files:
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            if not lines:
                continue
            cut = f", last {_FILE_LINES} of {len(lines)} lines" if len(lines) > _FILE_LINES else ""
            self.acquire()
            try:
                self._write(key, "\n".join([f"----- {path.name} ({path}{cut})", *lines[-_FILE_LINES:],
                                             f"----- end of {path.name}"]))
            finally:
                self.release()

    # ---------------------------------------------------------------- records

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            key = self._owner(record)
            self._write(key, line)
            if self._echo is not None and record.levelno >= logging.WARNING:
                where = f"[{key[1]} on {key[0]}] " if key else ""
                self._echo.write(f"{where}{line}\n")
                self._echo.flush()
        except Exception:  # noqa: BLE001 - logging must never break the run
            self.handleError(record)

    def _thread_exception(self, args: threading.ExceptHookArgs) -> None:
        """An exception that ended a thread: into the log (and so the scenario's file), not bare stderr."""
        name = args.thread.name if args.thread is not None else "?"
        logging.getLogger("conformance.threads").error(
            "thread %s ended with an exception", name,
            exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback))

    def _owner(self, record: logging.LogRecord) -> tuple[str, str] | None:
        with _LOCK:
            key = _THREADS.get(record.thread or 0)
            if key is not None or not _OWNERS:
                return key
            owners = dict(_OWNERS)
        tb = record.exc_info[2] if record.exc_info else None
        # Emitted synchronously: this thread's stack is the emitter's (and a traceback's frames, if any).
        for frame in _frames(sys._getframe(), tb):
            this = frame.f_locals.get("self")
            if this is None:
                continue
            for candidate in (this, getattr(this, "engine", None)):
                found = owners.get(id(candidate))
                if found is not None and found[0]() is candidate:
                    return found[1]
        return None

    def _write(self, key: tuple[str, str] | None, line: str) -> None:
        if self.out_dir is None:
            return
        path = self.out_dir / "logs" / "run.log" if key is None else log_path(self.out_dir, pair=key[0],
                                                                             scenario=key[1])
        # Handler.handle holds the handler's lock around emit, so appends do not interleave.
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        if key is not None:
            self.written.setdefault(key, path)


def _frames(frame: FrameType | None, tb: TracebackType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next
