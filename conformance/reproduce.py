"""The `Reproduce with:` line: one scenario on one pair again, as a command that works pasted into the
shell the run was started from.

The line starts with the words the user ran (`./dev sdk NAME`, `.venv/bin/conformance run`, `conformance
run` when that is on PATH, or `python -m conformance run`), carries every option that chose the pair's
declarations and the SDK under test (absolute paths), and writes its reports to `reproduce/` inside the
run's reports folder, so pasting it never overwrites the reports it came from.
`reproduce_command` is the one builder; the CLI, the runner and the pytest path all call it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Set by ./dev to the words that stand for `conformance run` there (e.g. `./dev sdk dapr-ext-workflow`).
RUN_AS_ENV = "CONFORMANCE_RUN_AS"
REPRODUCE_FOLDER = "reproduce"


@dataclass(frozen=True, kw_only=True)
class Invocation:
    """How the run was started: what a reproduce line repeats."""

    run: tuple[str, ...] = ("conformance", "run")  # the words that stand for `conformance run`
    options: tuple[str, ...] = ()  # the options that chose declarations, targets and the SDK (absolute paths)
    reports: Path | None = None  # the run's reports folder; None: the run wrote none (--no-reports)


def run_words(*, environ: Mapping[str, str] | None = None, argv0: str | None = None,
              executable: str | None = None) -> tuple[str, ...]:
    """The words the user typed for `conformance run`, as they work pasted from the same folder."""
    env = os.environ if environ is None else environ
    if env.get(RUN_AS_ENV):
        return tuple(shlex.split(env[RUN_AS_ENV]))
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if Path(argv0).name == "conformance":  # the console script
        on_path = shutil.which("conformance", path=env.get("PATH"))
        if on_path and os.path.realpath(on_path) == os.path.realpath(argv0):
            return ("conformance", "run")
        return (os.path.abspath(argv0), "run")
    # `python -m conformance`: the same interpreter, and the package's folder when only PYTHONPATH finds it.
    words: list[str] = []
    if env.get("PYTHONPATH"):
        words.append("PYTHONPATH=" + ":".join(os.path.abspath(p) for p in env["PYTHONPATH"].split(":") if p))
    return (*words, os.path.abspath(executable), "-m", "conformance", "run")


def installed_run_words(*, environ: Mapping[str, str] | None = None, executable: str | None = None) -> tuple[str, ...]:
    """From inside another program (the pytest path): the words `conformance run` has when the user runs it
    from the same environment, i.e. through the console script installed beside this interpreter (what
    an installed user types, and what `run_words` says in that run); `python -m conformance run` when
    the package is not installed there (a checkout on PYTHONPATH)."""
    executable = sys.executable if executable is None else executable
    script = Path(executable).with_name("conformance")
    return run_words(environ=environ, argv0=str(script) if script.is_file() else "", executable=executable)


def reproduce_command(scenario_id: str, *, sidecar: str, worker: str, invocation: Invocation = Invocation()) -> str:
    """The command that runs `scenario_id` on the pair (sidecar, worker) again."""
    # `./dev sdk NAME` names the worker too; `run` takes a repeated --worker once.
    words = [*invocation.run, "--sidecar", sidecar, "--worker", worker, "--scenario", scenario_id, *invocation.options]
    if invocation.reports is None:
        words.append("--no-reports")
    else:
        words += ["--reports", str(Path(os.path.abspath(invocation.reports)) / REPRODUCE_FOLDER)]
    # PYTHONPATH=... stays an unquoted assignment; everything else is quoted for a POSIX shell.
    head = [w for w in words if w.startswith("PYTHONPATH=")]
    rest = [w for w in words if not w.startswith("PYTHONPATH=")]
    return " ".join([*("PYTHONPATH=" + shlex.quote(w.partition("=")[2]) for w in head), shlex.join(rest)])


__all__ = ["Invocation", "REPRODUCE_FOLDER", "RUN_AS_ENV", "installed_run_words", "reproduce_command", "run_words"]
