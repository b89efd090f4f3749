"""Targets from targets.yaml, with their starters; pairs of a sidecar and a worker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from conformance.targets.base import Gap, Pair, SidecarTarget, WorkerTarget

DEFAULT_TARGETS = Path(__file__).with_name("targets.yaml")
DRIVERS = Path(__file__).resolve().parents[2] / "drivers"
SIDECAR_KINDS = ("reference", "durabletask-go", "address")
WORKER_KINDS = ("reference", "command")


class TargetError(ValueError):
    """Unknown or misdeclared target: says which, and what is known."""


@dataclass(frozen=True)
class Targets:
    sidecars: Mapping[str, SidecarTarget]
    workers: Mapping[str, WorkerTarget]

    def sidecar(self, name: str, *, address: str | None = None) -> SidecarTarget:
        if name not in self.sidecars:
            raise TargetError(f"unknown sidecar {name!r}; known: {', '.join(self.sidecars)}")
        target = self.sidecars[name]
        if target.kind == "address":
            if not address:
                raise TargetError(f"sidecar {name!r} needs --sidecar-address HOST:PORT")
            from conformance.targets.external import AddressSidecar

            target = replace(target, starter=lambda *, options, work_dir: AddressSidecar(address))
        return target

    def worker(self, name: str, *, command: str | None = None) -> WorkerTarget:
        if name not in self.workers:
            raise TargetError(f"unknown worker {name!r}; known: {', '.join(self.workers)}")
        target = self.workers[name]
        if target.kind == "command" and target.starter is None:
            if not command:
                raise TargetError(f"worker {name!r} needs --worker-command '... {{address}} ... {{programs}} ...'")
            from conformance.targets.external import start_command_worker

            target = replace(target, starter=partial(start_command_worker, name=name, command=command))
        return target

    def pair(self, sidecar: str, worker: str, *, sidecar_address: str | None = None,
             worker_command: str | None = None) -> Pair:
        return Pair(sidecar=self.sidecar(sidecar, address=sidecar_address),
                    worker=self.worker(worker, command=worker_command))


def _gaps(raw: Any, where: str) -> tuple[Gap, ...]:
    out = []
    for i, g in enumerate(raw or []):
        if not isinstance(g, Mapping) or "requirement" not in g or "reason" not in g:
            raise TargetError(f"{where}.not_implemented[{i}]: a gap is {{requirement, reason, evidence}}")
        scenarios = g.get("scenarios") or ()
        if isinstance(scenarios, str):
            scenarios = (scenarios,)
        out.append(Gap(requirement=str(g["requirement"]), reason=str(g["reason"]), evidence=str(g.get("evidence", "")),
                       scenarios=tuple(map(str, scenarios))))
    return tuple(out)


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TargetError(f"cannot load targets from {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise TargetError(f"{path}: a targets file is a mapping with 'sidecars' and/or 'workers'")
    return doc


def load_targets(path: Path = DEFAULT_TARGETS, *, drivers: Path | None = DRIVERS) -> Targets:
    """The targets of `path`, plus each SDK driver's own `drivers/<sdk>/target.yaml`."""
    doc = _read(path)
    for extra in sorted(drivers.glob("*/target.yaml")) if drivers is not None and drivers.is_dir() else ():
        more = _read(extra)
        for group in ("sidecars", "workers"):
            for name, raw in (more.get(group) or {}).items():
                if name in (doc.get(group) or {}):
                    raise TargetError(f"{extra}: {group}.{name} is already declared in {path}")
                doc.setdefault(group, {})[name] = raw
    sidecars: dict[str, SidecarTarget] = {}
    workers: dict[str, WorkerTarget] = {}
    for name, raw in (doc.get("sidecars") or {}).items():
        kind = raw.get("kind")
        if kind not in SIDECAR_KINDS:
            raise TargetError(f"{path}: sidecars.{name}.kind {kind!r}; known: {', '.join(SIDECAR_KINDS)}")
        starter = None
        if kind == "reference":
            from conformance.targets.reference import start_reference_sidecar

            starter = start_reference_sidecar
            defaults = dict(raw.get("options") or {})
            from conformance.scenario.loader import SIDECAR_OPTIONS

            unknown = sorted(set(defaults) - SIDECAR_OPTIONS)
            if unknown:
                raise TargetError(f"{path}: sidecars.{name}.options: unknown option(s) {', '.join(unknown)}; "
                                  f"known: {', '.join(sorted(SIDECAR_OPTIONS))}")
            if defaults:  # target options (e.g. task_execution_id: passthrough) under each scenario's own
                starter = partial(_with_defaults, start_reference_sidecar, defaults)
        elif kind == "durabletask-go":
            from conformance.targets.external import start_durabletask_go

            starter = start_durabletask_go
        sidecars[name] = SidecarTarget(name=name, kind=kind, capabilities=frozenset(raw.get("capabilities") or ()),
                                       gaps=_gaps(raw.get("not_implemented"), f"sidecars.{name}"),
                                       starter=starter, reference=kind == "reference")
    for name, raw in (doc.get("workers") or {}).items():
        kind = raw.get("kind")
        if kind not in WORKER_KINDS:
            raise TargetError(f"{path}: workers.{name}.kind {kind!r}; known: {', '.join(WORKER_KINDS)}")
        starter = replayer = None
        if kind == "reference":
            from conformance.targets.reference import reference_replayer, start_reference_worker

            starter, replayer = start_reference_worker, reference_replayer
        elif raw.get("command"):
            from conformance.targets.external import start_command_worker

            starter = partial(start_command_worker, name=name, command=raw["command"],
                              ready_line=raw.get("ready_line"), install=raw.get("install"))
        workers[name] = WorkerTarget(name=name, kind=kind, capabilities=frozenset(raw.get("capabilities") or ()),
                                     gaps=_gaps(raw.get("not_implemented"), f"workers.{name}"), starter=starter,
                                     replayer=replayer, reference=kind == "reference")
    return Targets(sidecars=sidecars, workers=workers)


def _with_defaults(start: Any, defaults: Mapping[str, Any], *, options: Mapping[str, Any], work_dir: Any) -> Any:
    return start(options={**defaults, **options}, work_dir=work_dir)
