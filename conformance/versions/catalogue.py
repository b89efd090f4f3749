"""The releases the version matrix runs (releases.yaml beside this module), as frozen data.

Pure: reading the YAML is the only I/O, and errors name the file and the entry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import InputError

RELEASES_PATH = Path(__file__).with_name("releases.yaml")


class ReleasesError(InputError):
    """releases.yaml (or a --versions selection) that cannot be used; the message says where."""


class Toolchain(enum.Enum):
    PIP = "pip"
    NPM = "npm"
    GO = "go"
    MAVEN = "maven"


@dataclass(frozen=True, kw_only=True)
class SdkRelease:
    sdk: str  # the SDK line, e.g. dapr-python
    version: str
    worker: str  # the worker target whose capabilities and gaps apply
    toolchain: Toolchain
    spec: tuple[str, ...]  # what the toolchain installs: pip requirements, one npm spec, one module@version...

    @property
    def label(self) -> str:
        return f"{self.sdk} {self.version}"

    @property
    def key(self) -> str:  # the cache folder's name
        return f"{self.sdk}-{self.version}"


@dataclass(frozen=True, kw_only=True)
class EngineRelease:
    engine: str
    version: str
    sidecar: str  # the sidecar target
    install: str = ""  # the script that builds it (DAPR_VERSION / DTGO_VERSION select the release)

    @property
    def label(self) -> str:
        return self.engine if self.engine == "reference" else f"{self.engine} {self.version}"


@dataclass(frozen=True, kw_only=True)
class Releases:
    sdks: dict[str, tuple[SdkRelease, ...]]  # newest first
    engines: dict[str, tuple[EngineRelease, ...]]  # newest first

    def select_sdk(self, text: str) -> tuple[SdkRelease, ...]:
        """`NAME` (every listed release) or `NAME@V1,V2` (those, in catalogue order)."""
        name, _, versions = text.partition("@")
        if name not in self.sdks:
            raise ReleasesError(f"--sdk {text!r}: unknown SDK {name!r}; known: {', '.join(self.sdks)}")
        return _pick(self.sdks[name], versions, f"--sdk {text!r}")

    def select_engine(self, text: str) -> tuple[EngineRelease, ...]:
        name, _, versions = text.partition("@")
        if name not in self.engines:
            raise ReleasesError(f"--engine {text!r}: unknown engine {name!r}; known: {', '.join(self.engines)}")
        return _pick(self.engines[name], versions, f"--engine {text!r}")


def _pick(releases: tuple[Any, ...], versions: str, where: str) -> tuple[Any, ...]:
    if not versions:
        return releases
    wanted = [v.strip() for v in versions.split(",") if v.strip()]
    known = {r.version for r in releases}
    unknown = [v for v in wanted if v not in known]
    if unknown:
        raise ReleasesError(f"{where}: no release {', '.join(unknown)} in {RELEASES_PATH.name}; "
                            f"listed: {', '.join(r.version for r in releases)}")
    return tuple(r for r in releases if r.version in wanted)


def load_releases(path: Path = RELEASES_PATH) -> Releases:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ReleasesError(f"{path}: cannot read ({exc})") from None
    sdks: dict[str, tuple[SdkRelease, ...]] = {}
    for name, raw in (doc.get("sdks") or {}).items():
        out = []
        for i, r in enumerate(raw.get("releases") or ()):
            where = f"{path}: sdks.{name}.releases[{i}]"
            tools = [t for t in Toolchain if t.value in r]
            if len(tools) != 1 or "version" not in r or "worker" not in r:
                raise ReleasesError(f"{where}: give version, worker and exactly one of "
                                    f"{', '.join(t.value for t in Toolchain)}")
            spec = r[tools[0].value]
            out.append(SdkRelease(sdk=str(name), version=str(r["version"]), worker=str(r["worker"]),
                                  toolchain=tools[0], spec=tuple(spec) if isinstance(spec, list) else (str(spec),)))
        sdks[str(name)] = tuple(out)
    engines: dict[str, tuple[EngineRelease, ...]] = {}
    for name, raw in (doc.get("engines") or {}).items():
        out_e = []
        for i, r in enumerate(raw.get("releases") or ()):
            if "version" not in r or "sidecar" not in r:
                raise ReleasesError(f"{path}: engines.{name}.releases[{i}]: give version and sidecar")
            out_e.append(EngineRelease(engine=str(name), version=str(r["version"]), sidecar=str(r["sidecar"]),
                                       install=str(r.get("install", ""))))
        engines[str(name)] = tuple(out_e)
    return Releases(sdks=sdks, engines=engines)
