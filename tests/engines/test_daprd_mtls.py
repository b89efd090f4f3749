"""daprd with Dapr's Sentry (the `daprd-mtls` target): sentry, placement, scheduler and two apps'
daprds on mTLS, and a workflow access policy that grants a cross-app call (it refuses every one
without mTLS, the declared R11.11 gap of the `daprd` target); with history signing on as well (the
`daprd-signing` target), completions come back attested (HIST-ATTEST-001).

Needs the binaries of scripts/install-daprd.sh, sentry included (`./dev test` installs them, cached
per user). As tests/engines/test_daprd.py, a missing binary fails with the install hint rather than
skip, so CI cannot go green without the engine.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conformance.events import Outcome
from conformance.library import find_library
from conformance.runner import Plan, run_plan
from conformance.scenario.loader import load_scenario
from conformance.targets.daprd import DaprBinaries, DaprdNotInstalledError, DaprdSidecar
from conformance.targets.registry import load_targets
from conformance.targets.sentry import Sentry, SentryStartError

GRANT = "crossapp/access-policy-grants-listed-calls"


def _binaries() -> DaprBinaries:
    try:
        binaries = DaprBinaries.find()
    except DaprdNotInstalledError as exc:
        pytest.fail(str(exc), pytrace=False)
    if not (binaries.daprd.parent / "sentry").is_file():
        pytest.fail(f"sentry binary not found next to {binaries.daprd}.\nInstall it with: scripts/install-daprd.sh",
                    pytrace=False)
    return binaries


def test_access_policy_grant_passes_on_daprd_with_sentry(tmp_path: Path) -> None:
    _binaries()
    root = find_library().scenarios
    scenario = load_scenario(root / f"{GRANT}.yaml", root=root)
    targets = load_targets()
    # The plain daprd target declares this scenario a gap that the mTLS one does not.
    assert targets.sidecars["daprd"].gaps and any(g.covers(GRANT, ()) for g in targets.sidecars["daprd"].gaps)
    pair = targets.pair("daprd-mtls", "reference")
    assert pair.gap_for(GRANT, scenario.requirements) is None
    [result] = run_plan(Plan(((scenario, pair),)), sinks=[], jobs=1, work_root=tmp_path)
    assert (result.scenario, result.outcome, result.message) == (GRANT, Outcome.PASSED, "")


def test_signing_daprd_attests_each_completion(tmp_path: Path) -> None:
    _binaries()
    root = find_library().scenarios
    sid = "history/completions-attested-when-signing"
    scenario = load_scenario(root / f"{sid}.yaml", root=root)
    [result] = run_plan(Plan(((scenario, load_targets().pair("daprd-signing", "reference")),)), sinks=[], jobs=1,
                        work_root=tmp_path)
    assert (result.scenario, result.outcome, result.message) == (sid, Outcome.PASSED, "")


def test_mtls_daprd_gets_its_identity_from_sentry_on_loopback(tmp_path: Path) -> None:
    sidecar = DaprdSidecar(options={"mtls": True}, work_dir=tmp_path, binaries=_binaries())
    plane = sidecar.plane
    try:
        assert plane.sentry is not None
        sentry_address = plane.sentry.mtls.sentry_address
        assert sentry_address.startswith("127.0.0.1:")
        argv = sidecar.process.spec.argv
        assert "--enable-mtls" in argv and argv[argv.index("--sentry-address") + 1] == sentry_address
        for process in (plane.placement, plane.scheduler):
            assert process.spec.argv[process.spec.argv.index("--sentry-address") + 1] == sentry_address
        # daprd got the run's root (made by sentry at start) and a workload certificate signed under it.
        anchors = plane.sentry.mtls.trust_anchors_file.read_text(encoding="ascii")
        assert anchors.startswith("-----BEGIN CERTIFICATE-----")
        assert sidecar.process.spec.env is not None and sidecar.process.spec.env["DAPR_TRUST_ANCHORS"] == anchors
        log = "".join(p.read_text(errors="replace") for p in sidecar.log_paths)
        assert "Security is initialized successfully" in log, log[-2000:]
    finally:
        sidecar.stop()
    assert not sidecar.process.is_running()


def test_sentry_that_cannot_start_names_its_log(tmp_path: Path) -> None:
    # A real process that exits at once in sentry's place: the error says so and where its log is.
    failing = tmp_path / "sentry"
    failing.write_text("#!/bin/sh\necho 'fatal: no issuer credentials' >&2\nexit 3\n", encoding="utf-8")
    failing.chmod(failing.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(SentryStartError) as info:
        Sentry(binary=failing, root=tmp_path / "run", ready_timeout=10)
    message = str(info.value)
    assert "sentry did not start" in message
    assert os.fspath(tmp_path / "run" / "logs") in message


def test_missing_sentry_binary_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(DaprdNotInstalledError, match="scripts/install-daprd.sh"):
        Sentry(binary=tmp_path / "absent" / "sentry", root=tmp_path / "run")
