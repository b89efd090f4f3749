"""Any release of a Python SDK is a fair target (issue #25 item 5): its driver probes the release's API,
the target's capabilities follow the release, and a scenario that needs what the release lacks is
NOT_APPLICABLE with the probed reason, never a crash of the driver.

On real older releases, each in its environment in the user cache (made by `conformance run
--sdk-version`, conformance/versions/envs.py, on first use; reused after): dapr-ext-workflow 1.15.1
(no versions, patching or app_id, and it calls activities only through a registered function) and
durabletask-dapr 0.2.0a9 (no is_patched, no versioned registration, a worker without stop_timeout), and
@dapr/durabletask-js 0.1.0-alpha.2 (its driver copy probes that release). Every other release:
docs/versions.md "Older releases".
"""

from __future__ import annotations

import json
import subprocess
import typing
from pathlib import Path

import pytest

from conformance.cli import main as conformance_main
from conformance.run_options import RunOptions, build_pairs
from conformance.targets.probe import Probed, lacking
from conformance.versions.catalogue import ReleasesError, load_releases
from conformance.versions.envs import ensure
from drivers.python.driver import takes_name

ROOT = Path(__file__).resolve().parents[2]
DX_OLD, DD_OLD = "1.15.1", "0.2.0a9"


def _pair(worker: str, version: str):
    (pair,) = build_pairs(RunOptions(worker=(worker,), sdk_version=version))
    return pair


def _outcomes(reports: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for line in (reports / "events.jsonl").read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        if "outcome" in e and "scenario" in e:
            out[e["scenario"]] = (e["outcome"], e.get("gap_reason") or e.get("message") or "")
    return out


# ------------------------------------------------------------------ pure parts


def test_a_release_not_listed_is_made_like_the_newest_and_an_older_one_as_listed() -> None:
    releases = load_releases()
    r = releases.for_worker("dapr-ext-workflow", "1.16.3")
    assert (r.sdk, r.key, r.spec) == ("dapr-python", "dapr-python-1.16.3", ("dapr-ext-workflow==1.16.3", "dapr==1.16.3"))
    assert releases.for_worker("dapr-ext-workflow", "0.5.0").spec == (
        "dapr-ext-workflow==0.5.0", "dapr==1.14.0", "durabletask==0.1.1a1")
    assert releases.for_worker("durabletask-dapr", "0.17.2") == releases.select_sdk("durabletask-dapr@0.17.2")[0]
    assert releases.for_worker("durabletask-go-worker", "v0.12.2").spec == ("github.com/dapr/durabletask-go@v0.12.2",)
    with pytest.raises(ReleasesError, match="worker 'reference' has no release line"):
        releases.for_worker("reference", "1.0")
    with pytest.raises(ReleasesError, match="not a release number"):
        releases.for_worker("durabletask-dapr", "../x")


def test_the_reason_names_the_release_and_what_the_probe_found() -> None:
    probed = Probed(sdk="dapr-ext-workflow 1.15.1", absent={"versions": "WorkflowRuntime has no register_versioned_workflow"})
    assert lacking(["versions", "stalls"], probed) == (
        "SDK release dapr-ext-workflow 1.15.1 lacks versions (probed: WorkflowRuntime has no "
        "register_versioned_workflow); the pair lacks capability stalls")
    assert lacking(["stalls", "rerun"], None) == "the pair lacks capabilities stalls, rerun"


def test_calling_by_name_is_read_from_the_annotation() -> None:
    def by_name(activity: typing.Union[typing.Callable[..., int], str]) -> None: ...
    def only_function(activity: typing.Callable[[typing.Any, str], int]) -> None: ...
    def as_text(activity: "Union[Activity[TInput, TOutput], str]") -> None: ...
    def text_without(activity: "Callable[[WorkflowActivityContext, TInput], TOutput]") -> None: ...

    assert takes_name(by_name, "activity") and takes_name(as_text, "activity")
    assert not takes_name(only_function, "activity") and not takes_name(text_without, "activity")
    assert not takes_name(by_name, "workflow")


def test_sdk_version_is_one_worker_and_no_other_replacement(capsys: pytest.CaptureFixture[str]) -> None:
    assert conformance_main(["run", "--worker", "dapr-ext-workflow", "--worker", "durabletask-dapr",
                             "--sdk-version", "1.16.3", "--no-reports"]) == 2
    assert "--sdk-version is a release of one SDK worker" in capsys.readouterr().err
    assert conformance_main(["run", "--worker", "durabletask-dapr", "--sdk-version", "0.17.0",
                             "--worker-command", "x {address}", "--no-reports"]) == 2
    assert "give one of them" in capsys.readouterr().err


# ------------------------------------------------------------------ real older releases


@pytest.mark.sdk
@pytest.mark.slow
def test_probe_of_a_real_older_release_and_the_capabilities_follow_it() -> None:
    releases = load_releases()
    for worker, version, adapter, absent, present in [
        ("dapr-ext-workflow", DX_OLD, "dapr_ext_workflow",
         {"versions", "patching", "patch_after_past", "crossapp", "propagation", "timer_origins", "event_wait_timer"},
         {"retries", "children", "carry_events", "all_fails_fast", "task_execution_id"}),
        ("durabletask-dapr", DD_OLD, "durabletask_dapr",
         # add_named_orchestrator is there but takes no version_name: the driver's registration would raise.
         {"versions", "patching", "patch_after_past", "task_execution_id", "teid_uuid5"},
         {"retries", "children", "carry_events", "all_fails_fast", "crossapp"}),
    ]:
        env = ensure(releases.for_worker(worker, version), root=ROOT, log=lambda m: None)
        done = subprocess.run([str(env.path / "bin" / "python"), str(ROOT / "drivers" / adapter / "driver.py"), "--probe"],
                              capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                              cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["sdk"] == f"{worker} {version}"
        assert set(doc["absent"]) == absent, doc
        # The target run with --sdk-version: declared minus what the release lacks, the release named.
        pair = _pair(worker, version)
        assert pair.worker.capabilities == _declared(worker) - absent
        assert present <= pair.worker.capabilities
        assert pair.worker.version == version and pair.worker.probed.sdk == f"{worker} {version}"
        assert str(env.path) in pair.worker.command


def _declared(worker: str) -> frozenset[str]:
    from conformance.targets.registry import load_targets

    return load_targets().workers[worker].capabilities


@pytest.mark.sdk
@pytest.mark.slow
def test_an_older_release_runs_what_it_has_and_declines_what_it_lacks(tmp_path: Path) -> None:
    # activities/chain crashed every activity on 1.15.1 before the driver passed a stand-in for the name;
    # the versioning scenario needs `versions`, which 1.15.1 lacks.
    chosen = ["activities/chain", "children/child-failure-reaches-parent", "versioning/latest-version-pinned",
              "patching/first-turn-reports-patch"]
    args = ["run", "--worker", "dapr-ext-workflow", "--sdk-version", DX_OLD, "--jobs", "2", "--reports", str(tmp_path)]
    for s in chosen:
        args += ["--scenario", s]
    rc = conformance_main(args)
    got = _outcomes(tmp_path)
    assert got["activities/chain"][0] == "PASSED", got
    assert got["children/child-failure-reaches-parent"][0] == "PASSED", got
    assert got["versioning/latest-version-pinned"] == (
        "NOT_APPLICABLE", "SDK release dapr-ext-workflow 1.15.1 lacks versions (probed: WorkflowRuntime has no "
                          "register_versioned_workflow)"), got
    assert got["patching/first-turn-reports-patch"][0] == "NOT_APPLICABLE"
    assert "SDK release dapr-ext-workflow 1.15.1 lacks patching (probed:" in got["patching/first-turn-reports-patch"][1]
    assert rc == 0


@pytest.mark.sdk
@pytest.mark.slow
def test_the_js_driver_probes_the_release_it_runs_with() -> None:
    # The driver file moves with the release's environment (a copy beside its node_modules): the probe
    # runs there, so it names that release, not the pin.
    pinned = subprocess.run(["node", str(ROOT / "drivers" / "durabletask_js" / "driver.js"), "--probe"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert pinned.returncode == 0, pinned.stderr
    assert json.loads(pinned.stdout) == {"sdk": "@dapr/durabletask-js 1.0.0", "absent": {}}
    pair = _pair("durabletask-js", "0.1.0-alpha.2")
    assert pair.worker.probed is not None and pair.worker.probed.sdk == "@dapr/durabletask-js 0.1.0-alpha.2"
    assert "durabletask-js-0.1.0-alpha.2" in pair.worker.probe
    assert pair.worker.capabilities == _declared("durabletask-js") - set(pair.worker.probed.absent)

