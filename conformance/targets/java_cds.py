"""A class-data archive (AppCDS) for the Java driver's JVM.

Every scenario starts a driver JVM (and a flow scenario a second one for its replays); on a loaded
machine most of its start-up is loading and verifying gRPC, Netty, protobuf and the SDK's classes from
their jars. A dynamic archive (`-XX:ArchiveClassesAtExit`, JDK >= 13) holds those classes parsed and
verified; a JVM given it (`-XX:SharedArchiveFile`) maps them instead.

The archive is made once per driver build and JDK: by scripts/install-java-driver.sh for the pinned driver
(`driver.jsa` beside its jar) and by the checkout build (checkout_java.py) for each overlay classpath, the
key then being the classpath's bytes and the JDK. It is made by one training run of the launcher itself
(so its JVM flags and classpath are those every later run has, which the JVM requires of an archive):
the driver starts, runs its in-process warm-up turn, connects to a reference sidecar, prints its ready
line, and is stopped; the JVM writes the archive as it exits. A JVM whose archive no longer matches its
classpath runs without it (the JDK checks the jars' sizes and times), so a stale archive costs time, not
correctness.

    python -m conformance.targets.java_cds LAUNCHER ARCHIVE   (the install script's use)
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

# The driver's minimal canonical bundle: no programs (the warm-up turn has its own).
_EMPTY_BUNDLE = {"format": "taskhub-programs/canonical", "version": 1, "programs": {}}
_READY = b"connected to "


def key(*, java: Path, classpath: Sequence[Path]) -> str:
    """What an archive is valid for: the JDK (its binary and its module image, which an update replaces), the
    bytes of each jar named and the size and time of each file under a folder named (the dependencies'
    jars, which the JVM itself checks the same way)."""
    h = hashlib.sha256()
    real = Path(os.path.realpath(java))
    h.update(str(real).encode() + b"\0")
    modules = real.parent.parent / "lib" / "modules"
    if modules.is_file():
        st = modules.stat()
        h.update(f"{st.st_size}:{st.st_mtime_ns}\0".encode())
    for entry in classpath:
        if entry.is_dir():
            for f in sorted(p for p in entry.rglob("*") if p.is_file()):
                st = f.stat()
                h.update(f"{f}\0{st.st_size}:{st.st_mtime_ns}\0".encode())
        else:
            h.update(str(entry).encode() + b"\0" + entry.read_bytes() + b"\0")
    return h.hexdigest()


def flag(archive: Path | None) -> str:
    """The JVM option that uses `archive` ("" when there is none)."""
    return f"-XX:SharedArchiveFile={archive}" if archive is not None and archive.is_file() else ""


def create(*, launcher: Path, archive: Path, timeout: float = 120.0) -> str | None:
    """Make `archive` by one training run of `launcher`; None when made, else why not (the driver runs
    without an archive, so a failure here is reported, not raised)."""
    from conformance.targets.reference import start_reference_sidecar

    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="java-cds-") as tmp:
        bundle = Path(tmp) / "programs.json"
        bundle.write_text(json.dumps(_EMPTY_BUNDLE), encoding="utf-8")
        sidecar = start_reference_sidecar(options={}, work_dir=Path(tmp))
        try:
            env = {**os.environ, "JAVA_OPTS": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off"}
            proc = subprocess.Popen([str(launcher), "--sidecar", sidecar.address, "--canonical", str(bundle)],
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
            stuck = threading.Timer(timeout, proc.kill)  # a driver that neither connects nor exits
            stuck.start()
            try:
                why = _until_ready(proc)
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=timeout)  # the archive is written as the JVM exits
            finally:
                stuck.cancel()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        finally:
            sidecar.stop()
    if why is not None:
        partial.unlink(missing_ok=True)
        return why
    if not partial.is_file() or partial.stat().st_size == 0:
        return f"the JVM wrote no archive (exit {proc.returncode})"
    os.replace(partial, archive)
    return None


def _until_ready(proc: subprocess.Popen[bytes]) -> str | None:
    assert proc.stdout is not None
    for line in proc.stdout:  # the driver prints its ready line once its work-item stream is open
        if line.startswith(_READY):
            return None
    try:  # its output ended: it is exiting (or closed its stdout, then the timer ends it)
        code: int | None = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
    return f"the driver did not connect to the training sidecar (exit {code})"


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m conformance.targets.java_cds LAUNCHER ARCHIVE", file=sys.stderr)
        return 2
    began = time.monotonic()
    why = create(launcher=Path(argv[0]), archive=Path(argv[1]))
    if why is not None:
        print(f"java_cds: no class-data archive ({why}); the driver runs without one", file=sys.stderr)
        return 1
    print(f"java_cds: made {argv[1]} in {time.monotonic() - began:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
