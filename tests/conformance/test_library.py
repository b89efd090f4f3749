"""Where the scenario library is found (conformance/library.py): CONFORMANCE_HOME, the checkout, the installed data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.library import HOME_ENV, LibraryError, find_library

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_is_its_own_library():
    lib = find_library(environ={})
    assert lib.checkout and lib.root == ROOT and lib.scenarios == ROOT / "scenarios"
    assert lib.reports == ROOT / "reports"


def test_installed_data_next_to_the_package(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    (site / "conformance_library" / "scenarios").mkdir(parents=True)
    (site / "conformance_library" / "drivers").mkdir()
    monkeypatch.chdir(tmp_path)
    lib = find_library(environ={}, site=site)
    assert not lib.checkout and lib.scenarios == site / "conformance_library" / "scenarios"
    assert lib.drivers == site / "conformance_library" / "drivers"
    assert lib.reports == tmp_path / "reports"  # the working directory, never site-packages


def test_home_overrides_and_is_checked(tmp_path):
    assert find_library(environ={HOME_ENV: str(ROOT)}, site=tmp_path).root == ROOT
    with pytest.raises(LibraryError, match=f"{HOME_ENV}=.*no scenarios/ folder there"):
        find_library(environ={HOME_ENV: str(tmp_path)})
    with pytest.raises(LibraryError, match="no scenario library"):
        find_library(environ={}, site=tmp_path)


def test_a_bad_home_is_bad_input_not_a_traceback(tmp_path):
    env = dict(os.environ, **{HOME_ENV: str(tmp_path)})
    out = subprocess.run([sys.executable, "-m", "conformance", "list"], capture_output=True, text=True,
                         env=env, timeout=120, cwd=tmp_path)
    assert out.returncode == 2 and f"{HOME_ENV}={tmp_path}: no scenarios/ folder there" in out.stderr
    assert "Traceback" not in out.stderr
