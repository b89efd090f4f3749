"""What the runner needs from a sidecar or a worker under test, whatever runs it.

A target is declared in `targets.yaml` (capabilities, known gaps) and knows how
to start one instance of itself for a scenario. Handles are ended by the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from taskhub_programs import Bundle

from conformance.errors import InputError
from conformance.scenario.engine import NO_SETTINGS, EngineSettings
from conformance.scenario.model import Direction


class TargetError(InputError):
    """Unknown or misdeclared target: says which, and what is known."""


@dataclass(frozen=True)
class Gap:
    """A requirement the target is known not to meet: shown as NOT_IMPLEMENTED, never hidden.

    `scenarios` (globs on scenario ids) narrows the gap to the scenarios that show it; without
    it the gap covers every scenario of the requirement. `when_lacking` narrows an engine's gap to
    pairs whose worker lacks one of these capabilities (a behaviour that shows only with such workers);
    `when_having` to pairs that have all of these (a behaviour of one variant of an engine, e.g.
    daprd with history signing, declared once in the gaps its variants share).
    """

    requirement: str
    reason: str
    evidence: str = ""
    scenarios: tuple[str, ...] = ()
    when_lacking: tuple[str, ...] = ()
    when_having: tuple[str, ...] = ()

    def covers(self, scenario_id: str, requirements: Sequence[str]) -> bool:
        import fnmatch

        if self.scenarios:
            return any(fnmatch.fnmatch(scenario_id, pattern) for pattern in self.scenarios)
        return self.requirement in requirements


class CannotExpress(Exception):
    """The target refused a scenario's programs: a step its SDK cannot express (a capability it lacks)."""


class SidecarHandle(Protocol):
    address: str

    def stop(self) -> None: ...

    def kill(self) -> None: ...  # abrupt: as kill -9 as the target allows

    def restart(self) -> None: ...  # on the same store and address


class WorkerHandle(Protocol):
    def stop(self) -> None: ...


# (instance id, past events, new events) -> {"actions": [...], "custom_status": ..., "version": {...}} | None
Replayer = Callable[[str, Sequence[Any], Sequence[Any]], "dict[str, Any] | None"]


@dataclass(frozen=True)
class WorkerStart:
    """Everything a worker target needs to start for one scenario."""

    address: str
    bundle: Bundle
    bundle_doc: Mapping[str, Any]
    work_dir: Path
    ledger: Path
    adversary: Sequence[Any] = ()
    api_token: str | None = None
    stateful_history: bool = False  # the reference worker's; an SDK worker does what its SDK does
    history_cache_instances: int | None = None
    # The reference worker's message limit, raised with the engine setting max_body_size so it can take
    # what such an engine sends (None: its default); an SDK worker keeps its SDK's own.
    max_message_bytes: int | None = None
    # How the reference worker's activities sleep: on the pair's engine time when both run here
    # (conformance/runner/harness.py); None: real time.
    sleep: Callable[[float], None] | None = None


@dataclass(frozen=True)
class SidecarTarget:
    name: str
    kind: str
    capabilities: frozenset[str]
    gaps: tuple[Gap, ...] = ()
    starter: Callable[..., SidecarHandle] | None = field(default=None, compare=False)
    reference: bool = False  # the reference engine (the "self"/"worker" directions)
    version: str = ""  # the engine release, as targets.yaml declares it
    # The run's engine settings (`--engine-setting`), under every scenario's own `engine:`.
    engine: EngineSettings = NO_SETTINGS

    def start(self, *, options: Mapping[str, Any], work_dir: Path) -> SidecarHandle:
        if self.starter is None:
            raise RuntimeError(f"sidecar target {self.name!r} cannot be started by the harness")
        return self.starter(options=options, work_dir=work_dir)


@dataclass(frozen=True)
class WorkerTarget:
    name: str
    kind: str
    capabilities: frozenset[str]
    gaps: tuple[Gap, ...] = ()
    starter: Callable[[WorkerStart], WorkerHandle] | None = field(default=None, compare=False)
    replayer: Callable[[Bundle], Replayer] | None = field(default=None, compare=False)  # in-process replay
    reference: bool = False
    version: str = ""  # the SDK release, as its target.yaml declares it
    # A command target's command line (placeholders unfilled), the script that installs what it runs
    # (relative to the library root) and a file that exists once it is installed: checked before any
    # scenario runs (conformance/targets/preflight.py).
    command: str = ""
    install: str = ""
    installed: str = ""
    # A command (relative to the library root) that exits 0 when what is installed is current: a
    # driver compiled from this library's sources says so when they changed since its build.
    current: str = ""
    # A command that prints what the installed SDK release lacks, and what it printed once run
    # (conformance/targets/probe.py): the capabilities above are then the declared ones minus those.
    probe: str = ""
    probed: Any = field(default=None, compare=False)
    # A command that keeps a driver warm across scenarios (conformance/targets/warm.py); "" for none.
    serve: str = ""
    provenance: str = ""  # which SDK build runs (a local checkout and its environment), for failure texts

    def start(self, spec: WorkerStart) -> WorkerHandle:
        if self.starter is None:
            raise RuntimeError(f"worker target {self.name!r} cannot be started by the harness")
        return self.starter(spec)


@dataclass(frozen=True)
class Pair:
    sidecar: SidecarTarget
    worker: WorkerTarget

    @property
    def label(self) -> str:
        return f"{self.sidecar.name}+{self.worker.name}"

    @property
    def direction(self) -> Direction:
        if self.sidecar.reference and self.worker.reference:
            return Direction.SELF
        if self.sidecar.reference:
            return Direction.WORKER
        if self.worker.reference:
            return Direction.ENGINE
        return Direction.PAIR

    @property
    def capabilities(self) -> frozenset[str]:
        return self.sidecar.capabilities | self.worker.capabilities

    @property
    def in_process(self) -> bool:
        """The reference sidecar and worker, both in the harness's process: nothing of the pair runs on a
        clock the harness cannot see (conformance/runner/harness.py runs it on engine time)."""
        return self.sidecar.kind == "reference" and self.worker.kind == "reference"

    def gap_for(self, scenario_id: str, requirements: Sequence[str]) -> Gap | None:
        for gap in self.sidecar.gaps + self.worker.gaps:
            if gap.when_lacking and set(gap.when_lacking) <= self.capabilities:
                continue
            if gap.when_having and not set(gap.when_having) <= self.capabilities:
                continue
            if gap.covers(scenario_id, requirements):
                return gap
        return None
