"""Targets from targets.yaml, with their starters; pairs of a sidecar and a worker."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from conformance.yamlload import safe_load
from conformance.targets.base import Gap, Pair, SidecarTarget, TargetError, WorkerTarget

DEFAULT_TARGETS = Path(__file__).with_name("targets.yaml")
SIDECAR_KINDS = ("reference", "durabletask-go", "daprd", "address")
WORKER_KINDS = ("reference", "command")


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
        # --worker-command also replaces a declared target's command (e.g. a local build of its SDK),
        # keeping its capabilities and gaps.
        if target.kind == "command" and (target.starter is None or command):
            if not command:
                raise TargetError(f"worker {name!r} needs --worker-command '... {{address}} ... {{programs}} ...'")
            from conformance.targets.external import start_command_worker

            target = replace(target, starter=partial(start_command_worker, name=name, command=command),
                             command=command, install="", installed="", current="", serve="",  # not the pinned build
                             probe=_probe_for(command, target.probe))
        if target.probe:
            from conformance.library import find_library
            from conformance.targets.probe import probed

            target = probed(target, root=find_library().root)
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
        lacking, having = (g.get(k) or () for k in ("when_lacking", "when_having"))
        lacking, having = ((c,) if isinstance(c, str) else c for c in (lacking, having))
        out.append(Gap(requirement=str(g["requirement"]), reason=str(g["reason"]), evidence=str(g.get("evidence", "")),
                       scenarios=tuple(map(str, scenarios)), when_lacking=tuple(map(str, lacking)),
                       when_having=tuple(map(str, having))))
    return tuple(out)


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = safe_load(path.read_text(encoding="utf-8"))  # libyaml's parser where PyYAML has it
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TargetError(f"cannot load targets from {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise TargetError(f"{path}: a targets file is a mapping with 'sidecars' and/or 'workers'")
    unknown = sorted(set(doc) - {"sidecars", "workers"})
    if unknown:
        raise TargetError(f"{path}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
                          "a targets file has 'sidecars' and/or 'workers'")
    for group in ("sidecars", "workers"):
        items = doc.get(group) or {}
        if not isinstance(items, dict) or not all(isinstance(v, dict) for v in items.values()):
            raise TargetError(f"{path}: {group} is a mapping of target name to {{kind, capabilities, ...}}")
    return doc


def _merged(files: Sequence[Path]) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], Path]]:
    """Every target of `files`, each with the file that declares it; a name declared twice is an error."""
    doc: dict[str, dict[str, Any]] = {"sidecars": {}, "workers": {}}
    origin: dict[tuple[str, str], Path] = {}
    for path in files:
        more = _read(path)
        for group in ("sidecars", "workers"):
            for name, raw in (more.get(group) or {}).items():
                name = str(name)
                if (group, name) in origin:
                    raise TargetError(f"{path}: {group}.{name} is already declared in {origin[group, name]}; "
                                      "rename one of them")
                origin[group, name] = path
                doc[group][name] = raw
    return doc, origin


def load_targets(path: Path = DEFAULT_TARGETS, *, drivers: Path | None = None,
                 extra: Sequence[Path] = ()) -> Targets:
    """The targets of `path`, each SDK driver's own `drivers/<sdk>/target.yaml` (`drivers` defaults
    to the library's, see conformance/library.py), then the `extra` files (e.g. `--targets`): all
    add to each other."""
    if drivers is None:
        from conformance.library import find_library

        drivers = find_library().drivers
    driver_files = sorted(drivers.glob("*/target.yaml")) if drivers.is_dir() else []
    doc, origin = _merged([path, *driver_files, *extra])
    sidecars: dict[str, SidecarTarget] = {}
    workers: dict[str, WorkerTarget] = {}
    for name, raw in doc["sidecars"].items():
        where = origin["sidecars", name]
        kind = raw.get("kind")
        if kind not in SIDECAR_KINDS:
            raise TargetError(f"{where}: sidecars.{name}.kind {kind!r}; known: {', '.join(SIDECAR_KINDS)}")
        starter = None
        if kind == "reference":
            from conformance.targets.reference import start_reference_sidecar

            starter = start_reference_sidecar
            defaults = dict(raw.get("options") or {})
            from conformance.scenario.loader import SIDECAR_OPTIONS

            unknown = sorted(set(defaults) - SIDECAR_OPTIONS)
            if unknown:
                raise TargetError(f"{where}: sidecars.{name}.options: unknown option(s) {', '.join(unknown)}; "
                                  f"known: {', '.join(sorted(SIDECAR_OPTIONS))}")
            if defaults:  # target options (e.g. task_execution_id: passthrough) under each scenario's own
                starter = partial(_with_defaults, start_reference_sidecar, defaults)
        elif kind == "durabletask-go":
            from conformance.targets.external import start_durabletask_go

            starter = start_durabletask_go
        elif kind == "daprd":
            from conformance.targets.daprd import TARGET_OPTIONS, start_daprd

            starter = start_daprd
            defaults = dict(raw.get("options") or {})
            unknown = sorted(set(defaults) - TARGET_OPTIONS)
            if unknown:
                raise TargetError(f"{where}: sidecars.{name}.options: unknown option(s) {', '.join(unknown)}; "
                                  f"known for a daprd target: {', '.join(sorted(TARGET_OPTIONS))}")
            if defaults.get("history_signing") and not defaults.get("mtls"):
                raise TargetError(f"{where}: sidecars.{name}.options: history_signing needs mtls: true "
                                  "(daprd refuses to sign without mTLS)")
            if defaults:  # e.g. mtls: true (the daprd-mtls target)
                starter = partial(_with_defaults, start_daprd, defaults)
        sidecars[name] = SidecarTarget(name=name, kind=kind, capabilities=_capabilities(raw, f"{where}: sidecars.{name}"),
                                       gaps=_gaps(raw.get("not_implemented"), f"{where}: sidecars.{name}"),
                                       starter=starter, reference=kind == "reference",
                                       version=str(raw.get("version", "")))
    for name, raw in doc["workers"].items():
        where = origin["workers", name]
        kind = raw.get("kind")
        if kind not in WORKER_KINDS:
            raise TargetError(f"{where}: workers.{name}.kind {kind!r}; known: {', '.join(WORKER_KINDS)}")
        starter = replayer = None
        if kind == "reference":
            from conformance.targets.reference import reference_replayer, start_reference_worker

            starter, replayer = start_reference_worker, reference_replayer
        elif raw.get("command") and raw.get("serve"):
            from conformance.targets.warm import start_served_worker

            starter = partial(start_served_worker, name=name, command=raw["command"],
                              ready_line=raw.get("ready_line"), install=raw.get("install"))
        elif raw.get("command"):
            from conformance.targets.external import start_command_worker

            starter = partial(start_command_worker, name=name, command=raw["command"],
                              ready_line=raw.get("ready_line"), install=raw.get("install"))
        workers[name] = WorkerTarget(name=name, kind=kind, capabilities=_capabilities(raw, f"{where}: workers.{name}"),
                                     gaps=_gaps(raw.get("not_implemented"), f"{where}: workers.{name}"), starter=starter,
                                     replayer=replayer, reference=kind == "reference",
                                     command=str(raw.get("command") or ""), install=str(raw.get("install") or ""),
                                     installed=str(raw.get("installed") or ""), current=str(raw.get("current") or ""),
                                     probe=str(raw.get("probe") or ""), serve=str(raw.get("serve") or ""),
                                     version=str(raw.get("version", "")))
    return Targets(sidecars=sidecars, workers=workers)


def _probe_for(command: str, probe: str) -> str:
    """The declared probe on a replaced command (a local build of the same driver): the new command
    up to the driver's script, then the probe's arguments; none for any other command."""
    words, probe_words = shlex.split(command), shlex.split(probe)
    script = next((w for w in probe_words[1:] if not w.startswith("-")), None)
    if script is None or script not in words:
        return ""
    at = words.index(script)
    return shlex.join(words[:at + 1] + probe_words[probe_words.index(script) + 1:])


def _capabilities(raw: Mapping[str, Any], where: str) -> frozenset[str]:
    caps = raw.get("capabilities") or ()
    if isinstance(caps, str) or not all(isinstance(c, str) for c in caps):
        raise TargetError(f"{where}.capabilities: a list of names, e.g. [timers, events]")
    return frozenset(caps)


def parse_gap(text: str) -> Gap:
    """`REQ=reason` or `REQ@glob[,glob]=reason` from the command line (`--gap`)."""
    head, sep, reason = text.partition("=")
    requirement, _, globs = head.partition("@")
    if not sep or not requirement.strip() or not reason.strip():
        raise TargetError(f"--gap {text!r}: write REQUIREMENT=reason or REQUIREMENT@scenario-glob=reason, "
                          "e.g. --gap 'TMR-TIMEOUT-001=timeout timers are not cancelled yet'")
    return Gap(requirement=requirement.strip(), reason=reason.strip(), evidence="declared on the command line",
               scenarios=tuple(g.strip() for g in globs.split(",") if g.strip()))


def declare(targets: Targets, *, sidecar_capabilities: Sequence[str] = (), sidecar_gaps: Sequence[Gap] = (),
            worker_capabilities: Sequence[str] = (), worker_gaps: Sequence[Gap] = ()) -> Targets:
    """Targets with capabilities and gaps from the command line added to every non-reference target."""
    def more(items, caps, gaps):
        return {name: t if t.reference else replace(t, capabilities=t.capabilities | frozenset(caps),
                                                    gaps=tuple(gaps) + t.gaps)
                for name, t in items.items()}

    return Targets(sidecars=more(targets.sidecars, sidecar_capabilities, sidecar_gaps),
                   workers=more(targets.workers, worker_capabilities, worker_gaps))


def _with_defaults(start: Any, defaults: Mapping[str, Any], *, options: Mapping[str, Any], work_dir: Any) -> Any:
    return start(options={**defaults, **options}, work_dir=work_dir)
