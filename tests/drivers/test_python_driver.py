"""The one Python driver and its adapters: probes, capabilities the harness takes off, refusals.

- `--probe` of each installed Python SDK prints what its release lacks as JSON; the pinned
  releases lack nothing the targets declare.
- A target's `probe:` output is taken off its declared capabilities before the run, also for a
  replaced worker command running the same driver script.
- taskhub_programs.capabilities names each construct's capability with the step's path.

The SDKs must be installed (`scripts/install-sdks.sh dx dd`); a missing install fails with that hint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.targets.probe import run_probe
from conformance.targets.registry import TargetError, load_targets
from taskhub_programs import load_bundle, parse_bundle
from taskhub_programs.capabilities import needs

pytestmark = pytest.mark.sdk

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {"dx": ROOT / "drivers" / "dapr_ext_workflow" / "driver.py",
            "dd": ROOT / "drivers" / "durabletask_dapr" / "driver.py"}


def _python(sdk: str) -> Path:
    python = ROOT / ".sdk" / sdk / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run scripts/install-sdks.sh {sdk}", pytrace=False)
    return python


@pytest.mark.parametrize("sdk", sorted(ADAPTERS))
def test_probe_of_the_pinned_release_finds_nothing_absent(sdk: str) -> None:
    done = subprocess.run([str(_python(sdk)), str(ADAPTERS[sdk]), "--probe"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["absent"] == {}, doc
    pinned = (ROOT / "drivers" / "sdk_envs" / f"{sdk}.txt").read_text(encoding="utf-8")
    dist, version = doc["sdk"].split()
    assert f"{dist}=={version}" in pinned, (doc, pinned)


def _probe_script(tmp_path: Path, absent: dict[str, str]) -> Path:
    script = tmp_path / "driver.py"
    script.write_text("import json, sys\nassert sys.argv[1:] == ['--probe'], sys.argv\n"
                      f"print(json.dumps({{'sdk': 'fake-sdk 9', 'absent': {absent!r}}}))\n", encoding="utf-8")
    return script


def test_probed_absences_are_taken_off_the_declared_capabilities(tmp_path: Path) -> None:
    script = _probe_script(tmp_path, {"all_fails_fast": "when_all waits", "versions": "no registration"})
    targets_file = tmp_path / "t.target.yaml"
    targets_file.write_text(yaml.safe_dump({"workers": {"probed-sdk": {
        "kind": "command", "command": f"{sys.executable} {script} --sidecar {{address}} --programs {{programs}}",
        "probe": f"{sys.executable} {script} --probe", "ready_line": "^connected to ",
        "capabilities": ["all_fails_fast", "versions", "timers"]}}}), encoding="utf-8")
    targets = load_targets(extra=[targets_file])
    worker = targets.worker("probed-sdk")
    assert worker.capabilities == frozenset({"timers"})
    assert worker.probed.sdk == "fake-sdk 9" and set(worker.probed.absent) == {"all_fails_fast", "versions"}
    # A local build of the same driver (--worker-command) is probed through its own interpreter.
    other = tmp_path / "venv-python"
    other.symlink_to(sys.executable)
    replaced = targets.worker("probed-sdk", command=f"{other} {script} --sidecar {{address}} --programs {{programs}}")
    assert replaced.probe.startswith(str(other)) and replaced.capabilities == frozenset({"timers"})
    # Another command keeps the declared capabilities: nothing to probe it with.
    foreign = targets.worker("probed-sdk", command=f"{sys.executable} elsewhere.py --sidecar {{address}}")
    assert foreign.probe == "" and "versions" in foreign.capabilities


def test_a_probe_not_installed_leaves_the_declaration_and_a_broken_one_stops_the_run(tmp_path: Path) -> None:
    # Not installed: the preflight names the install command; the probe has nothing to say.
    assert run_probe(f"{tmp_path}/missing/python x.py --probe", str(ROOT)) is None
    # Installed but the probe fails (a release too old for the driver to import): never the pin's capabilities.
    garbled = tmp_path / "garbled.py"
    garbled.write_text("print('not json')\n", encoding="utf-8")
    with pytest.raises(TargetError, match="printed no JSON line"):
        run_probe(f"{sys.executable} {garbled}", str(ROOT))
    crashing = tmp_path / "crashing.py"
    crashing.write_text("import sys\nsys.exit('ImportError: cannot import name when_all')\n", encoding="utf-8")
    with pytest.raises(TargetError, match="exited 1(.|\n)*cannot import name when_all"):
        run_probe(f"{sys.executable} {crashing}", str(ROOT))


def test_each_construct_names_its_capability_and_path() -> None:
    bundle = parse_bundle({"programs": {
        "main": {"steps": [
            {"call_child": {"workflow": "main", "retry": {"max_attempts": 2, "first_delay": 1, "timeout": "1m"}}},
            {"if_patched": {"patch": "p", "then": [{"any": [{"timer": "1s"}, {"wait_event": "go"}]}]}},
            {"continue_as_new": {"carry_events": True}}]},
        "versioned": {"versions": {"v1": {"steps": [{"return": 1}]}}}}})
    assert sorted(needs(bundle)) == sorted([
        ("children", "$.programs.main.steps[0].call_child"),
        ("retries", "$.programs.main.steps[0].call_child.retry"),
        ("retry_timeout", "$.programs.main.steps[0].call_child.retry.timeout"),
        ("patching", "$.programs.main.steps[1].if_patched"),
        ("timers", "$.programs.main.steps[1].if_patched.then[0].any[0].timer"),
        ("events", "$.programs.main.steps[1].if_patched.then[0].any[1].wait_event"),
        ("carry_events", "$.programs.main.steps[2].continue_as_new.carry_events"),
        ("versions", "$.programs.versioned.versions")])
    example = load_bundle(ROOT / "taskhub_programs" / "examples" / "bundle.yaml")
    assert {cap for cap, _ in needs(example)} >= {"children", "timers", "events", "patching", "versions", "retries"}


def test_a_spawn_is_refused_by_its_capability_whatever_the_release() -> None:
    """No Python adapter drives `spawn`: the bundle is refused (exit 3) naming the step and detached_spawn."""
    import taskhub_programs
    from drivers.python.driver import Language, _runners, problems
    from fake_worker import activities

    _runners(taskhub_programs)  # as the driver does at start

    class Release:  # an adapter whose release lacks nothing it can be asked about
        sdk, wait_timeout, custom_status = "some-sdk 1.0", True, True

        def absent(self) -> dict[str, str]:
            return {}

    bundle = parse_bundle({"programs": {"main": {"steps": [
        {"if": {"cond": True, "then": [{"spawn": {"workflow": "main"}, "as": "s"}]}}, {"return": "${s}"}]}}})
    assert problems(bundle, Release(), Language(P=taskhub_programs, A=activities)) == [
        {"path": "$.programs.main.steps[0].if.then[0].spawn", "capability": "detached_spawn",
         "reason": "some-sdk 1.0: this driver has no spawn (a detached workflow started from workflow code); the "
                   "Python SDK adapters map no such call"}]
