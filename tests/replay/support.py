"""Shared steps of the replay tests: record histories with an app, capture them with
`conformance capture`, replay them with `conformance replay`, read the verdicts it wrote.

Apps run as separate processes with their SDK's own toolchain (never in the pytest process).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main as conformance_main
from conformance.replay.history import load  # noqa: F401 - used by the tests too
from fake_sidecar.server import SidecarServer

REPO = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent / "apps"
RECORD_TIMEOUT_S = 240


@dataclass(frozen=True)
class App:
    """How to run one SDK's app: `argv(mode, address, version)` is the command line."""

    name: str
    prefix: tuple[str, ...]
    cwd: Path | None = None

    def argv(self, mode: str, address: str, version: str, *extra: str) -> list[str]:
        return [*self.prefix, mode, "--address", address, "--version", version, *extra]

    def command(self, version: str) -> str:
        import shlex

        return shlex.join(self.argv("serve", "{address}", version)).replace("'{address}'", "{address}")


def require(path: Path, how: str) -> None:
    if not path.exists():
        pytest.fail(f"{path} is missing: {how}", pytrace=False)


def record(app: App, address: str, *extra: str, version: str = "v1") -> dict[str, list[str]]:
    done = subprocess.run(app.argv("record", address, version, *extra), capture_output=True, text=True,
                          timeout=RECORD_TIMEOUT_S, cwd=app.cwd)
    assert done.returncode == 0, f"{app.name} record failed ({done.returncode}):\n{done.stderr[-4000:]}"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"{app.name} record printed no JSON line:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads(lines[-1])


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = conformance_main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def capture(address: str, ids: Sequence[str], out: Path) -> list[Path]:
    args = ["capture", "--from", address, "--out", str(out)]
    for iid in ids:
        args += ["--instance", iid]
    rc, stdout, stderr = cli(*args)
    assert rc == 0, f"capture failed ({rc}): {stderr}"
    return sorted(out.glob("*.json"))


def replay(histories: Path, command: str, reports: Path, *extra: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    rc, stdout, stderr = cli("replay", str(histories), "--worker-command", command, "--reports", str(reports),
                             "--timeout", "60", *extra)
    summary = reports / "summary.json"
    assert summary.is_file(), f"replay wrote no summary (exit {rc}):\n{stdout}\n{stderr}"
    doc = json.loads(summary.read_text())
    return rc, {i["instanceId"]: i for i in doc["instances"]}, stdout + stderr


@contextlib.contextmanager
def reference_sidecar() -> Iterator[SidecarServer]:
    server = SidecarServer.start(port=0, db=":memory:")
    try:
        yield server
    finally:
        server.stop()


def first_index(path: Path, kind: str, *, name: str | None = None, after: int = 0) -> int:
    """Index in a history file of the first event of `kind` (and activity `name`) at or after `after`."""
    h = load(path)
    for i, ev in enumerate(h.events):
        if i >= after and ev.HasField(kind) and (name is None or getattr(ev, kind).name == name):
            return i
    raise AssertionError(f"no {kind} {name or ''} in {path}")


def after_reserve(path: Path, kind: str, *, name: str | None = None) -> int:
    """The first `kind` event history recorded after the `reserve` activity completed."""
    return first_index(path, kind, name=name, after=first_index(path, "taskCompleted"))


def check_versions(app: App, histories: Path, reports: Path, *, v2: dict[str, int | None],
                   patched: bool = True) -> None:
    """The four replays of the issue against histories recorded from v1: v1 clean; v2 (an activity
    added after `reserve`) nondeterminism at the event `v2` names per instance (None: clean, the
    change lies past the end of that running instance's history); v2-patched clean; renamed not
    registered."""
    rc, got, text = replay(histories, app.command("v1"), reports / "v1")
    assert rc == 0 and {v["verdict"] for v in got.values()} == {"CLEAN"}, text

    rc, got, text = replay(histories, app.command("v2"), reports / "v2")
    assert rc == (1 if any(i is not None for i in v2.values()) else 0), text
    for iid, want in v2.items():
        if want is None:
            assert got[iid]["verdict"] == "CLEAN", (iid, got[iid], text)
            continue
        assert got[iid]["verdict"] == "NONDETERMINISM", (iid, got[iid], text)
        assert got[iid]["eventIndex"] == want, (iid, got[iid], text)
        assert "audit" in got[iid]["headline"], got[iid]
    if patched:
        rc, got, text = replay(histories, app.command("v2-patched"), reports / "v2-patched")
        assert rc == 0 and {v["verdict"] for v in got.values()} == {"CLEAN"}, text

    rc, got, text = replay(histories, app.command("renamed"), reports / "renamed")
    assert rc == 1, text
    for iid in v2:
        assert got[iid]["verdict"] == "NOT_REGISTERED", (iid, got[iid], text)
