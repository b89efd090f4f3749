"""Where the shipped library is: the scenario folder, the SDK drivers and their install scripts.

Lookup, first match wins:
1. `CONFORMANCE_HOME`: a folder holding `scenarios/` (and `drivers/`, `scripts/`), e.g. a checkout
   of this repository used with an installed package;
2. the checkout the `conformance` package runs from (a clone, or an editable install);
3. the installed package data: a wheel carries the three folders under `conformance_library/`
   next to the `conformance` package (setup.py maps them).
The catalogue, the schemas and targets.yaml are ordinary package data of `conformance`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from conformance.errors import InputError

HOME_ENV = "CONFORMANCE_HOME"
_SITE = Path(__file__).resolve().parents[1]  # the checkout, or site-packages


class LibraryError(InputError):
    """No scenario library where the lookup expected one."""


@dataclass(frozen=True, kw_only=True)
class Library:
    root: Path  # holds scenarios/, drivers/, scripts/
    checkout: bool  # a source tree (reports default to its reports/) rather than installed data

    @property
    def scenarios(self) -> Path:
        return self.root / "scenarios"

    @property
    def drivers(self) -> Path:
        return self.root / "drivers"

    @property
    def scripts(self) -> Path:
        return self.root / "scripts"

    @property
    def work(self) -> Path:
        """Where generated files go by default (reports/, fuzz findings, the fuzz database): the
        checkout, or the working directory of an installed package (never site-packages)."""
        return self.root if self.checkout else Path.cwd()

    @property
    def reports(self) -> Path:
        return self.work / "reports"


def find_library(*, environ: os._Environ[str] | dict[str, str] | None = None, site: Path = _SITE) -> Library:
    env = os.environ if environ is None else environ
    if home := env.get(HOME_ENV):
        root = Path(home).expanduser().resolve()
        if not (root / "scenarios").is_dir():
            raise LibraryError(f"{HOME_ENV}={home}: no scenarios/ folder there; unset it or point it at a "
                               "checkout of taskhub-conformance")
        return Library(root=root, checkout=(root / "pyproject.toml").is_file())
    if (site / "pyproject.toml").is_file() and (site / "scenarios").is_dir():
        return Library(root=site, checkout=True)
    installed = site / "conformance_library"
    if (installed / "scenarios").is_dir():
        return Library(root=installed, checkout=False)
    raise LibraryError(f"no scenario library: neither {site / 'scenarios'} nor {installed / 'scenarios'} exists "
                       f"(a broken install?); reinstall taskhub-conformance or set {HOME_ENV} to a checkout")
