"""A command worker that does not come up (it refuses the programs, or never says it is ready) is ended and
reaped at once, not left as a zombie (or a live process) for the rest of the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.targets import external
from conformance.targets.base import CannotExpress, WorkerStart
from conformance.targets.process import ManagedProcess, ProcessTimeoutError
from taskhub_programs import parse_bundle

DOC = {"main": {"steps": [{"return": 1}]}}


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[ManagedProcess]:
    """The processes the target starts, kept here so the test can look at them after start() raised."""
    procs: list[ManagedProcess] = []
    real = ManagedProcess.start

    def recording(*, spec):  # type: ignore[no-untyped-def]
        proc = real(spec=spec)
        procs.append(proc)
        return proc

    monkeypatch.setattr(ManagedProcess, "start", staticmethod(recording))
    return procs


def _start(tmp_path: Path, code: str, **kw: object) -> None:
    spec = WorkerStart(address="127.0.0.1:1", bundle=parse_bundle({"programs": DOC}), bundle_doc=DOC,
                       work_dir=tmp_path, ledger=tmp_path / "ledger.jsonl")
    external.start_command_worker(spec, name="test-driver", command=[sys.executable, "-c", code], **kw)


def test_a_refusal_is_reaped(tmp_path, started):
    with pytest.raises(CannotExpress, match="cannot express"):
        _start(tmp_path, "import sys; print('$.programs.main: no such step', file=sys.stderr); sys.exit(3)")
    [proc] = started
    assert proc._popen.returncode == 3  # waited for: no zombie left


def test_a_worker_that_never_gets_ready_is_ended(tmp_path, started):
    with pytest.raises(ProcessTimeoutError):
        _start(tmp_path, "import time\nwhile True: time.sleep(1)", ready_timeout=0.5)
    [proc] = started
    assert proc._popen.returncode is not None  # ended and waited for, not left running
