"""A copy of an SDK's environment for a campaign: mutants are written into the copy, never into the
cached install that `./dev sdk` and the tests run (.sdk/NAME stays byte for byte as installed).

The copy is made once per work folder and made again when the installed executor changes (its
files' hashes are the stamp). coverage.py is installed into the copy only, for the line map.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conformance.mutation.sdks import Scope, SdkSpec, site_packages

COVERAGE = "coverage==7.18.0"  # the line map's tool, in the copy only (docs/mutation.md)


@dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
    spec: SdkSpec
    installed: Path  # the cached install (read only)
    copy: Path  # the campaign's copy

    @property
    def python(self) -> Path:
        return self.copy / "bin" / "python"

    @property
    def site(self) -> Path:
        return site_packages(self.copy)


def stamp(*, venv: Path, scopes: tuple[Scope, ...]) -> str:
    site = site_packages(venv)
    digest = hashlib.sha256()
    for scope in scopes:
        digest.update(scope.relpath.encode())
        digest.update((site / scope.relpath).read_bytes())
    return digest.hexdigest()[:16]


def prepare(spec: SdkSpec, *, root: Path, work: Path, scopes: tuple[Scope, ...]) -> Environment:
    installed = root / ".sdk" / spec.venv
    if not (installed / "bin" / "python").exists():
        raise FileNotFoundError(f"{spec.name}: {installed} is not installed; run scripts/install-sdks.sh {spec.venv}")
    copy = work / spec.name / "venv"
    want = stamp(venv=installed, scopes=scopes)
    marker = copy / ".mutation-stamp"
    if not (marker.exists() and marker.read_text(encoding="utf-8") == want):
        if copy.exists():
            shutil.rmtree(copy)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(installed, copy, symlinks=True)
        done = subprocess.run([str(copy / "bin" / "python"), "-m", "pip", "install", "--quiet", COVERAGE],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing {COVERAGE} into {copy} failed:\n{done.stderr[-2000:]}")
        marker.write_text(want, encoding="utf-8")
    # A campaign ended midway (killed) may have left a mutant in the copy: start from the installed text.
    for scope in scopes:
        shutil.copyfile(site_packages(installed) / scope.relpath, site_packages(copy) / scope.relpath)
    return Environment(spec=spec, installed=installed, copy=copy)
