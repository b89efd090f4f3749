"""A driver's PYTHONPATH: the program language, and nothing else of the harness's environment."""

from __future__ import annotations

import os
from pathlib import Path

import taskhub_programs

from conformance.targets.external import driver_path

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_root_holds_the_language():
    assert driver_path(ROOT) == str(ROOT)


def test_an_installed_library_gets_a_folder_with_what_drivers_import_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("TASKHUB_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "site-packages" / "conformance_library"  # as the wheel lays it out
    root.mkdir(parents=True)
    first, shim = driver_path(root).split(os.pathsep)
    assert first == str(root)
    assert sorted(p.name for p in Path(shim).iterdir()) == ["fake_worker", "taskhub_programs"]
    assert (Path(shim) / "taskhub_programs").resolve() == Path(taskhub_programs.__file__).resolve().parent
    assert driver_path(root) == os.pathsep.join([str(root), shim])  # made once, then reused
