"""The committed *_pb2 modules must be what the current .proto files generate."""

from __future__ import annotations

import subprocess
import sys

from taskhub_wire import generate


def test_committed_modules_match_protos() -> None:
    stale = generate.stale_files()
    assert not stale, (
        "generated modules differ from their .proto files: "
        + ", ".join(stale)
        + "; run `python -m taskhub_wire.generate` and commit the result"
    )


def test_check_mode_exit_code() -> None:
    # The command line used by CI and developers, end to end.
    done = subprocess.run(
        [sys.executable, "-m", "taskhub_wire.generate", "--check"],
        cwd=generate.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_check_mode_reports_stale_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A copy of the tree whose proto changed but whose module did not must be reported.
    proto = "taskhub_wire/daprrt/workflow.proto"
    for rel in (proto, *generate.generated_files((proto,))):
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((generate.REPO_ROOT / rel).read_bytes())
    edited = tmp_path / proto
    edited.write_text(edited.read_text().replace("bytes event_data = 4;", "bytes event_data = 7;"))

    assert generate.stale_files(root=tmp_path, protos=(proto,)) == ["taskhub_wire/daprrt/workflow_pb2.py"]
