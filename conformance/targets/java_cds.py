"""A class-data archive (AppCDS) for the Java driver's JVM.

Every scenario starts a driver JVM (and a flow scenario a second one for its replays); on a loaded
machine most of its start-up is loading and verifying gRPC, Netty, protobuf and the SDK's classes from
their jars. A class-data archive holds those classes parsed and verified; a JVM given it
(`-XX:SharedArchiveFile`) maps them instead.

Two kinds, each made by one training run of the launcher itself (so its JVM flags and classpath are those
every later run has, which the JVM requires of an archive): the driver starts, runs its in-process warm-up
turn, connects to a reference sidecar, prints its ready line, and is stopped.

- `create`: a dynamic archive (`-XX:ArchiveClassesAtExit`, JDK >= 13) of every class the run loaded, written as the JVM exits. The pinned driver's
  (`driver.jsa` beside its jar, by scripts/install-java-driver.sh), whose jars never change between builds.
- `create_static`: a static archive (`-Xshare:dump` over the run's class list) of every class except the
  SDK's, for a classpath that starts with the driver's dependencies and classes and ends with the SDK's
  jars (checkout_java.py). The JVM accepts an archive whose classpath is a prefix of its own, so the jars
  after that prefix (an overlay of the classes an author just edited, the SDK's client jar) can change
  from run to run with the archive still mapped: an edit costs no new training run.

A JVM whose archive no longer matches its classpath runs without it (the JDK checks the jars' sizes and
times), so a stale archive costs time, not correctness.

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
import zipfile
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
    """Make `archive` (dynamic) by one training run of `launcher`; None when made, else why not (the driver runs
    without an archive, so a failure here is reported, not raised)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    why, code = _train(launcher=launcher, timeout=timeout,
                       java_opts=f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off")
    return _publish(partial=partial, archive=archive, why=why, code=code)


def create_static(*, launcher: Path, java: Path, jvm_flags: Sequence[str], classpath: Sequence[Path],
                  leave_out: Sequence[Path], archive: Path, timeout: float = 120.0) -> str | None:
    """Make `archive` (static) of the classes one training run of `launcher` loads, except those of the jars in
    `leave_out`, for JVMs run with `jvm_flags` whose classpath starts with `classpath`; None when made, else
    why not."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="java-cds-") as tmp:
        loaded = Path(tmp) / "loaded.classlist"
        why, code = _train(launcher=launcher, timeout=timeout, java_opts=f"-XX:DumpLoadedClassList={loaded}")
        if why is not None:
            return why
        if not loaded.is_file():
            return f"the JVM wrote no class list (exit {code})"
        kept = Path(tmp) / "kept.classlist"
        kept.write_text(_without(loaded.read_text(encoding="utf-8", errors="replace"), jars=leave_out),
                        encoding="utf-8")
        try:
            dump = subprocess.run([str(java), *jvm_flags, "-Xshare:dump", f"-XX:SharedClassListFile={kept}",
                                   f"-XX:SharedArchiveFile={partial}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off",
                                   "-cp", ":".join(map(str, classpath))],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            partial.unlink(missing_ok=True)
            return f"-Xshare:dump did not finish in {timeout:.0f} s"
    if dump.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = (dump.stdout + dump.stderr).strip().splitlines()[-1:] or [""]
        return f"-Xshare:dump failed (exit {dump.returncode}: {tail[0][:200]})"
    return _publish(partial=partial, archive=archive, why=None, code=0)


def _without(classlist: str, *, jars: Sequence[Path]) -> str:
    """`classlist` (the JVM's -XX:DumpLoadedClassList format) without the classes of `jars`, nor the lambda
    proxies those classes made (`@lambda-proxy CALLER ...`)."""
    names: set[str] = set()
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            names.update(n.removesuffix(".class") for n in z.namelist() if n.endswith(".class"))
    kept = []
    for line in classlist.splitlines():
        words = line.split()
        owner = words[1] if len(words) > 1 and words[0] == "@lambda-proxy" else (words[0] if words else "")
        if owner.replace(".", "/") not in names:
            kept.append(line)
    return "\n".join(kept) + "\n"


def _publish(*, partial: Path, archive: Path, why: str | None, code: int | None) -> str | None:
    if why is not None:
        partial.unlink(missing_ok=True)
        return why
    if not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return f"the JVM wrote no archive (exit {code})"
    os.replace(partial, archive)
    return None


def _train(*, launcher: Path, java_opts: str, timeout: float) -> tuple[str | None, int | None]:
    """One run of `launcher` with `java_opts`, from start to its ready line, then stopped: (why it failed or None,
    its exit status)."""
    from conformance.targets.reference import start_reference_sidecar

    with tempfile.TemporaryDirectory(prefix="java-cds-") as tmp:
        bundle = Path(tmp) / "programs.json"
        bundle.write_text(json.dumps(_EMPTY_BUNDLE), encoding="utf-8")
        sidecar = start_reference_sidecar(options={}, work_dir=Path(tmp))
        try:
            proc = subprocess.Popen([str(launcher), "--sidecar", sidecar.address, "--canonical", str(bundle)],
                                    env={**os.environ, "JAVA_OPTS": java_opts}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            stuck = threading.Timer(timeout, proc.kill)  # a driver that neither connects nor exits
            stuck.start()
            try:
                why = _until_ready(proc)
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=timeout)  # an archive or class list is written as the JVM exits
            finally:
                stuck.cancel()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        finally:
            sidecar.stop()
    return why, proc.returncode


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
