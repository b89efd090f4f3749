"""The releases the version matrix runs (releases.yaml beside this module), as frozen data.

Pure: reading the YAML is the only I/O, and errors name the file and the entry.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from conformance.yamlload import safe_load
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
    # Why today's driver cannot be built against this release (it is compiled against the pinned API), where
    # that is known: the cell is still tried and reported "not run", but does not fail the matrix.
    unbuildable: str = ""

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
    # Releases the matrix does not run but `--sdk-version` may, listed because their requirements
    # cannot be made from the newest's (dapr-ext-workflow 0.5.0 went with dapr 1.14.0).
    older: dict[str, tuple[SdkRelease, ...]] = field(default_factory=dict)

    def select_sdk(self, text: str) -> tuple[SdkRelease, ...]:
        """`NAME` (every listed release) or `NAME@V1,V2` (those, in catalogue order)."""
        name, _, versions = text.partition("@")
        if name not in self.sdks:
            raise ReleasesError(f"--sdk {text!r}: unknown SDK {name!r}; known: {', '.join(self.sdks)}")
        return _pick(self.sdks[name], versions, f"--sdk {text!r}")

    def one_sdk_release(self, text: str) -> SdkRelease:
        """`NAME@V`, one release to replay a corpus on: the listed one, else any release a registry serves, made
        as `--sdk-version` makes it for the worker of the nearest listed release not newer than V (the oldest
        listed when every one is newer): dapr-python@1.18.0 is dapr-ext-workflow 1.18.0 with dapr 1.18.0."""
        name, _, version = text.partition("@")
        if name not in self.sdks:
            raise ReleasesError(f"--sdk {text!r}: unknown SDK {name!r}; known: {', '.join(self.sdks)}")
        if not version.strip() or "," in version:
            raise ReleasesError(f"--sdk {text!r}: name one release (NAME@VERSION)")
        listed = self.sdks[name]
        found = [r for r in (*listed, *self.older.get(name, ())) if r.version == version]
        if found:
            return found[0]
        older = [r for r in listed if _version_key(r.version) <= _version_key(version)]
        model = max(older, key=lambda r: _version_key(r.version)) if older else listed[-1]
        return self.for_worker(model.worker, version)

    def for_worker(self, worker: str, version: str) -> SdkRelease:
        """The release `version` of the SDK a worker target runs (`conformance run --worker W --sdk-version V`):
        the listed one, else one made like the newest listed release of that worker, its version
        replaced in every requirement (`dapr-ext-workflow==V`, `dapr==V`). Cached under the same key
        as the version matrix's (`<sdk line>-<version>`)."""
        if not version.strip() or any(c.isspace() or c in "/\\" for c in version):
            raise ReleasesError(f"--sdk-version {version!r}: not a release number (e.g. 1.16.3, 0.17.0, v0.12.1)")
        lines = [(line, r) for line, rs in self.sdks.items() for r in rs if r.worker == worker]
        if not lines:
            workers = sorted({r.worker for rs in self.sdks.values() for r in rs})
            raise ReleasesError(f"--sdk-version: worker {worker!r} has no release line in {RELEASES_PATH.name}; "
                                f"workers with releases: {', '.join(workers)}")
        for r in [r for _, r in lines] + [r for rs in self.older.values() for r in rs if r.worker == worker]:
            if r.version == version:
                return r
        line, newest = lines[0]
        return SdkRelease(sdk=line, version=version, worker=worker, toolchain=newest.toolchain,
                          spec=tuple(s.replace(newest.version, version) for s in newest.spec))

    def select_engine(self, text: str) -> tuple[EngineRelease, ...]:
        name, _, versions = text.partition("@")
        if name not in self.engines:
            raise ReleasesError(f"--engine {text!r}: unknown engine {name!r}; known: {', '.join(self.engines)}")
        return _pick(self.engines[name], versions, f"--engine {text!r}")


def _version_key(version: str) -> tuple[tuple[int, ...], int, str]:
    """Release order within one line: numbers first, a pre-release (0.2.0a9, 1.17.0-rc-4) before its release."""
    m = re.match(r"v?(\d+(?:\.\d+)*)(.*)", version)
    if not m:
        return ((), 0, version)
    return tuple(int(x) for x in m.group(1).split(".")), 0 if m.group(2) else 1, m.group(2)


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
        doc = safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ReleasesError(f"{path}: cannot read ({exc})") from None
    sdks: dict[str, tuple[SdkRelease, ...]] = {}
    older: dict[str, tuple[SdkRelease, ...]] = {}
    for name, raw in (doc.get("sdks") or {}).items():
        sdks[str(name)] = _sdk_releases(raw.get("releases"), name=str(name), where=f"{path}: sdks.{name}.releases")
        older[str(name)] = _sdk_releases(raw.get("older"), name=str(name), where=f"{path}: sdks.{name}.older")
    engines: dict[str, tuple[EngineRelease, ...]] = {}
    for name, raw in (doc.get("engines") or {}).items():
        out_e = []
        for i, r in enumerate(raw.get("releases") or ()):
            if "version" not in r or "sidecar" not in r:
                raise ReleasesError(f"{path}: engines.{name}.releases[{i}]: give version and sidecar")
            out_e.append(EngineRelease(engine=str(name), version=str(r["version"]), sidecar=str(r["sidecar"]),
                                       install=str(r.get("install", ""))))
        engines[str(name)] = tuple(out_e)
    return Releases(sdks=sdks, engines=engines, older=older)


def _sdk_releases(raw: Any, *, name: str, where: str) -> tuple[SdkRelease, ...]:
    out = []
    for i, r in enumerate(raw or ()):
        tools = [t for t in Toolchain if t.value in r]
        if len(tools) != 1 or "version" not in r or "worker" not in r:
            raise ReleasesError(f"{where}[{i}]: give version, worker and exactly one of "
                                f"{', '.join(t.value for t in Toolchain)}")
        spec = r[tools[0].value]
        out.append(SdkRelease(sdk=name, version=str(r["version"]), worker=str(r["worker"]),
                              toolchain=tools[0], spec=tuple(spec) if isinstance(spec, list) else (str(spec),),
                              unbuildable=" ".join(str(r.get("unbuildable") or "").split())))
    return tuple(out)
