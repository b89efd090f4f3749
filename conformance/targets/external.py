"""Targets the harness starts as processes: durabletask-go, SDK drivers, user commands, a given address."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskhub_programs import canonical_form

from conformance.targets.durabletask_go import DurableTaskGoSidecar
from conformance.targets.base import CannotExpress, WorkerStart
from conformance.targets.process import ManagedProcess, ProcessExitedError, ProcessSpec


def start_durabletask_go(*, options: Mapping[str, Any], work_dir: Path) -> Any:
    return DurableTaskGoSidecar().start(log_dir=work_dir / "durabletask-go")


@dataclass
class AddressSidecar:
    """A sidecar the user runs: the harness only talks to it (no restarts)."""

    address: str

    def stop(self) -> None:
        return None

    def kill(self) -> None:
        raise RuntimeError("an address target cannot be killed by the harness; declare no 'restart' capability")

    def restart(self) -> None:
        raise RuntimeError("an address target cannot be restarted by the harness")

    def wait_until_workflows_ready(self) -> None:
        # A daprd accepts workflow calls only once a worker is connected; other engines answer at once.
        from conformance.targets.daprd import wait_workflows_ready

        wait_workflows_ready(self.address, timeout=60.0)


@dataclass
class ProcessWorker:
    proc: ManagedProcess

    def stop(self) -> None:
        self.proc.stop(timeout=10)


def write_bundle(spec: WorkerStart) -> tuple[Path, Path]:
    """The worker's programs as two files: the bundle as written (`{"programs": ...}`, what the
    drivers read today) and beside it its canonical form (docs/programs.md, "The canonical form")."""
    stem = f"programs-{abs(hash(json.dumps(spec.bundle_doc, sort_keys=True, default=str)))}"
    path = spec.work_dir / f"{stem}.json"
    path.write_text(json.dumps({"programs": spec.bundle_doc}, indent=1), encoding="utf-8")
    canonical = spec.work_dir / f"{stem}.canonical.json"
    canonical.write_text(json.dumps(canonical_form(spec.bundle_doc), indent=1), encoding="utf-8")
    return path, canonical


def start_command_worker(spec: WorkerStart, *, name: str, command: Sequence[str] | str,
                         ready_line: str | None = r"^connected to ", env: Mapping[str, str] | None = None,
                         ready_timeout: float = 60.0, install: str | None = None) -> ProcessWorker:
    """A worker the user (or a driver) provides as a command line with placeholders.

    Placeholders: {address} (host:port), {host}, {port}, {programs} (a JSON bundle file),
    {canonical} (the same programs in the canonical form, a JSON file),
    {ledger} (the ledger file), {python} (this interpreter), {root} (the library root: the checkout, or the installed
    package data; conformance/library.py).
    """

    from conformance.library import find_library

    root = find_library().root  # drivers/ and the SDKs their install scripts put in .sdk/, .tools/
    programs, canonical = write_bundle(spec)
    host, _, port = spec.address.rpartition(":")
    values = {"address": spec.address, "host": host, "port": port, "programs": str(programs),
              "canonical": str(canonical),
              "ledger": str(spec.ledger), "python": sys.executable, "root": str(root)}
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    argv = [a.format(**values) for a in argv]
    program = Path(argv[0])
    if program.is_absolute() and not program.exists():
        hint = f"; install it with {install}" if install else ""
        raise FileNotFoundError(f"{name}: {program} does not exist{hint}")
    full_env = dict(os.environ)
    full_env.update({"CONFORMANCE_LEDGER": str(spec.ledger), "PYTHONPATH": driver_path(root)})
    if spec.api_token:
        full_env["DAPR_API_TOKEN"] = spec.api_token
    full_env.update(env or {})
    proc = ManagedProcess.start(spec=ProcessSpec(name=name, argv=tuple(argv), log_dir=spec.work_dir, env=full_env,
                                                 cwd=root))
    if ready_line:
        try:
            proc.wait_for_line(ready_line, timeout=ready_timeout)
        except BaseException as exc:
            proc.stop()  # reaped (a refusal's exit left a zombie for the run's life) or, if it hangs, ended
            if isinstance(exc, ProcessExitedError) and exc.returncode == EXIT_CANNOT_EXPRESS:
                raise cannot_express(name, exc.stderr_tail) from None
            raise
    return ProcessWorker(proc=proc)


# What the Python drivers import of ours (drivers/python/driver.py): pure Python, no protobuf.
DRIVER_PACKAGES = ("taskhub_programs", "fake_worker")


def driver_path(root: Path) -> str:
    """PYTHONPATH for a driver: the library root and the packages of ours a driver imports.

    From a checkout the root holds them. From an installed package they sit in the harness's
    site-packages, beside our grpc and protobuf, which must not reach an SDK's environment; so a folder in
    the user cache holds links to those packages alone.
    """
    import hashlib
    import importlib.util

    packages = [Path(importlib.util.find_spec(name).origin).resolve().parent  # type: ignore[arg-type, union-attr]
                for name in DRIVER_PACKAGES]
    if all(p.parent == Path(root).resolve() for p in packages):
        return str(root)
    from conformance.targets.checkout import cache_root

    key = hashlib.sha256("|".join(map(str, packages)).encode()).hexdigest()[:12]
    shim = cache_root() / "driver-path" / key
    shim.mkdir(parents=True, exist_ok=True)
    for package in packages:
        link = shim / package.name
        if not link.exists():
            tmp = shim / f".{package.name}.{os.getpid()}"
            tmp.symlink_to(package, target_is_directory=True)
            os.replace(tmp, link)  # atomic: parallel workers may make it at once
    return os.pathsep.join([str(root), str(shim)])


# Drivers exit with 3 when a program uses a step their SDK cannot express (drivers/*/README.md), and
# may name each step on a line of its own: `cannot-express: {"path", "capability", "reason"}` (JSON).
EXIT_CANNOT_EXPRESS = 3
REFUSAL_PREFIX = "cannot-express: "


def cannot_express(name: str, stderr_tail: str) -> CannotExpress:
    """The error for a driver that exited with EXIT_CANNOT_EXPRESS, naming the steps it refused."""
    return CannotExpress(f"{name} cannot express the scenario's programs: {_refusal(stderr_tail)}")


def _refusal(stderr: str) -> str:
    """The driver's structured refusals as one line; else its last line of stderr."""
    found = []
    for line in stderr.splitlines():
        if line.startswith(REFUSAL_PREFIX):
            try:
                p = json.loads(line[len(REFUSAL_PREFIX):])
                found.append(f"{p['path']}: " + (f"lacks {p['capability']}: " if p.get("capability") else "")
                             + str(p["reason"]))
            except (ValueError, KeyError, TypeError):
                continue
    if found:
        return "; ".join(found)
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else ""
