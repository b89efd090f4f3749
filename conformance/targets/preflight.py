"""Before any scenario runs: is every target of the run installed? One message for all that is
missing, each with the command that installs it, written for the folder the user is in.

A run that would fail every scenario the same way (a driver's interpreter or binary missing, or a
compiled driver older than its sources) is bad input, not a hundred target failures: the CLI prints
this and exits 2.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from conformance.targets.base import Pair, SidecarTarget, WorkerTarget


def command_from(root: Path, script: str, *, cwd: Path | None = None) -> str:
    """`script` (a path under the library root with its arguments) as the user types it from `cwd`:
    relative when the root is the working directory or below it, else absolute."""
    # abspath, not resolve: a symlinked library folder is shown as the user knows it.
    cwd = Path(os.path.abspath(cwd or Path.cwd()))
    words = shlex.split(script)
    path = Path(os.path.abspath(root / words[0]))
    try:
        shown = path.relative_to(cwd).as_posix()
        shown = shown if "/" in shown else f"./{shown}"
    except ValueError:
        shown = str(path)
    return shlex.join([shown, *words[1:]])


def _worker_problem(target: WorkerTarget, root: Path, cwd: Path | None) -> str | None:
    if target.reference or not target.command:
        return None
    values = {"root": str(root), "python": "python"}
    try:
        argv = [a.format_map(_Keep(values)) for a in shlex.split(target.command)]
    except ValueError:
        return None
    program = argv[0]
    missing = ""
    if "/" in program:
        if not Path(program).exists():
            missing = program
    elif shutil.which(program) is None:
        return f"worker {target.name}: '{program}' is not on PATH (it runs the driver: install it first)"
    if not missing and target.installed:
        marker = target.installed.format_map(_Keep(values))
        if not Path(marker).exists():
            missing = marker
    if not missing:
        return _stale_problem(target, root, cwd)
    fix = (f"install it with:\n    {command_from(root, target.install, cwd=cwd)}" if target.install
           else "its command names a file that does not exist; fix --worker-command or the target's command")
    return f"worker {target.name} is not installed ({missing} does not exist); {fix}"


# Asking a build script whether its build is current reads the driver's sources and, for Java, the
# JVM's version: seconds on a loaded machine, never minutes.
CURRENT_TIMEOUT_S = 120


def _stale_problem(target: WorkerTarget, root: Path, cwd: Path | None) -> str | None:
    """The target's `current:` check (its install script with --check), run from the library root:
    the script that builds the driver is the one that knows what its build depends on."""
    if not target.current:
        return None
    words = shlex.split(target.current)
    argv = ["bash", str(root / words[0]), *words[1:]]
    try:
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=CURRENT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"worker {target.name}: could not check its build ({shlex.join(argv)}: {exc})"
    if done.returncode == 0:
        return None
    said = " ".join(done.stderr.split()) or f"{words[0]} --check exited {done.returncode}"
    fix = command_from(root, target.install, cwd=cwd) if target.install else shlex.join(words[:1])
    return f"worker {target.name} needs a rebuild ({said}); rebuild it with:\n    {fix}"


def _sidecar_problem(target: SidecarTarget, root: Path, cwd: Path | None) -> str | None:
    if target.kind == "durabletask-go":
        from conformance.targets.durabletask_go import INSTALL_SCRIPT, default_binary

        binary = default_binary()
        if not binary.is_file():
            return (f"sidecar {target.name} is not installed ({binary} does not exist); install it with:\n"
                    f"    {command_from(root, INSTALL_SCRIPT, cwd=cwd)}")
    if target.kind == "daprd":
        from conformance.targets.daprd import DEFAULT_BIN_DIR, INSTALL_SCRIPT

        # An mTLS target (daprd-mtls, daprd-signing) also runs sentry, built by the same script.
        names = ("daprd", "placement", "scheduler") + (("sentry",) if "mtls" in target.capabilities else ())
        missing = [n for n in names if not (DEFAULT_BIN_DIR / n).is_file()]
        if missing:
            return (f"sidecar {target.name} is not installed ({', '.join(str(DEFAULT_BIN_DIR / n) for n in missing)} "
                    f"missing); install it with:\n    {command_from(root, INSTALL_SCRIPT, cwd=cwd)}")
    return None


def not_installed(pairs: Sequence[Pair], *, root: Path, cwd: Path | None = None) -> list[str]:
    """One problem per target of `pairs` that cannot start because something is not installed."""
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for pair in pairs:
        for key, problem in ((("sidecar", pair.sidecar.name), lambda: _sidecar_problem(pair.sidecar, root, cwd)),
                             (("worker", pair.worker.name), lambda: _worker_problem(pair.worker, root, cwd))):
            if key in seen:
                continue
            seen.add(key)
            if text := problem():
                out.append(text)
    return out


class _Keep(dict):
    """str.format_map that leaves unknown placeholders ({address}, {programs}...) as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


__all__ = ["command_from", "not_installed"]
