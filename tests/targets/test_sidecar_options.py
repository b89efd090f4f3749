"""Target options of a reference sidecar (targets.yaml `options:`), under each scenario's own."""

from __future__ import annotations

import pytest

from conformance.targets.registry import TargetError, load_targets


def test_reference_spec_target_starts_the_engine_in_spec_mode(tmp_path):
    from fake_sidecar.engine import TaskExecutionIdMode

    target = load_targets().sidecar("reference-spec")
    sidecar = target.starter(options={}, work_dir=tmp_path)
    try:
        assert sidecar.engine.config.task_execution_id is TaskExecutionIdMode.SPEC
    finally:
        sidecar.stop()
    (tmp_path / "p").mkdir()
    plain = load_targets().sidecar("reference").starter(options={}, work_dir=tmp_path / "p")
    try:
        assert plain.engine.config.task_execution_id is TaskExecutionIdMode.PASSTHROUGH
    finally:
        plain.stop()


def test_an_unknown_target_option_is_a_clear_error(tmp_path):
    path = tmp_path / "targets.yaml"
    path.write_text("sidecars:\n  odd:\n    kind: reference\n    options: {speed: fast}\nworkers: {}\n", encoding="utf-8")
    with pytest.raises(TargetError, match=r"sidecars.odd.options: unknown option\(s\) speed; known: "):
        load_targets(path)
