"""Real third-party SDKs, as worker and client, against the reference sidecar.

Each test starts our sidecar in-process on a free port, runs `tests/sdk/apps/<sdk>_app.py` for one
case with the SDK's own virtualenv python (`.sdk/<sdk>`, made by scripts/install-sdks.sh) as a
separate process, parses its one JSON result line and checks the observations. SDK code never runs
in the pytest process: its generated protobuf modules would clash with ours.

Set TASKHUB_SDK_SIDECAR=HOST:PORT to aim the apps at an already running sidecar instead (for
example durabletask-go, to compare engines by hand). Run that mode without xdist (`-n 0`): the
workers of concurrent apps on one sidecar compete for each other's work items and fail with
OrchestratorNotRegisteredError. durabletask-go has no stalls and no Dapr runtime API, so
patch_stall, version_stall and runtime_api fail there by design.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

pytestmark = pytest.mark.sdk

REPO_ROOT = Path(__file__).resolve().parents[2]
APPS_DIR = Path(__file__).resolve().parent / "apps"
SDK_ROOT = REPO_ROOT / ".sdk"

APP_CASE_TIMEOUT_S = 60  # the app's own watchdog
PROCESS_TIMEOUT_S = APP_CASE_TIMEOUT_S + 30  # ours, if the app's watchdog itself hangs
STDERR_TAIL_LINES = 40

SDKS = ("dx", "dd")
COMMON_CASES = (
    "chain",
    "fan_out_in",
    "timer",
    "event_before_wait",
    "event_after_wait",
    "child",
    "continue_as_new",
    "retry",
    "suspend_resume",
    "terminate_recursive",
    "purge",
    "patch_stall",
    "version_stall",
)
SDK_CASES: dict[str, tuple[str, ...]] = {
    "dx": COMMON_CASES + ("runtime_api",),
    # durabletask-dapr is not a Dapr runtime API client.
    "dd": COMMON_CASES,
}

# --- expectations --------------------------------------------------------------------------------
# Per case: detail key -> expected value, or a predicate (value -> bool) with its description.


@dataclass(frozen=True)
class Pred:
    describe: str
    test: Callable[[Any], bool]


def _at_least(limit: float) -> Pred:
    return Pred(f">= {limit}", lambda v: isinstance(v, (int, float)) and v >= limit)


def _has_stall(reason: str) -> Pred:
    return Pred(
        f"an executionStalled event with reason {reason}",
        lambda v: isinstance(v, list) and any(s.get("reason") == reason for s in v),
    )


_CONTAINS_STALLED = Pred(
    'an error whose message contains "stalled"',
    lambda v: isinstance(v, str) and v != "accepted" and "stalled" in v.lower(),
)
_NOT_FOUND = Pred(
    "a gRPC error (instance gone)", lambda v: isinstance(v, str) and not v.startswith("OK")
)

EXPECTED: dict[str, dict[str, Any]] = {
    "chain": {"status": "COMPLETED", "output": [11, 12, 13]},
    "fan_out_in": {"status": "COMPLETED", "output": {"count": 20, "sum": 2470}},
    "timer": {"status": "COMPLETED", "output": _at_least(1.0), "wall_seconds": _at_least(1.0)},
    "event_before_wait": {"status": "COMPLETED", "output": {"event": {"when": "before"}}},
    "event_after_wait": {"status": "COMPLETED", "output": {"event": {"when": "after"}}},
    "child": {
        "status": "COMPLETED",
        "output": {"child": 10},
        "child_status": "COMPLETED",
        "child_output": 10,
    },
    "continue_as_new": {"status": "COMPLETED", "output": 3, "final_input": 3},
    "retry": {"status": "COMPLETED", "output": "ok after 3 attempts", "attempts": 3},
    "suspend_resume": {
        "status_after_pause": "SUSPENDED",
        "status_after_event_while_suspended": "SUSPENDED",
        "status": "COMPLETED",
        "output": {"event": {"v": 1}},
    },
    "terminate_recursive": {
        "child_status_before": "RUNNING",
        "status": "TERMINATED",
        "output": "stopped",
        "child_status": "TERMINATED",
    },
    "purge": {"status": "COMPLETED", "exists_after_purge": False},
    "patch_stall": {
        "status_turn1": "RUNNING",
        "status_unpatched": "STALLED",
        "stalls": _has_stall("PATCH_MISMATCH"),
        "status": "COMPLETED",
        "output": {"branch": "new", "event": "x"},
    },
    "version_stall": {
        "status_turn1": "RUNNING",
        "status_v2_only": "STALLED",
        "stalls": _has_stall("VERSION_NOT_AVAILABLE"),
        "raise_while_stalled": _CONTAINS_STALLED,
        "status_recovered": "RUNNING",
        "status": "COMPLETED",
        "output": {"version": "v1", "event": "y"},
    },
    "runtime_api": {
        "status_started": "RUNNING",
        "get_workflow_name": "rt_wf",
        "custom_status": "got:hello",
        "status_paused": "SUSPENDED",
        "status_resumed": "RUNNING",
        "status_terminated": "TERMINATED",
        "get_after_purge": _NOT_FOUND,
        "sdk_client_exists_after_purge": False,
    },
}


# --- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture
def sidecar_address() -> Iterator[str]:
    """Our reference sidecar, in-process on a free port; one per test, so xdist never shares."""
    external = os.environ.get("TASKHUB_SDK_SIDECAR")
    if external:
        yield external
        return
    from fake_sidecar.server import SidecarServer

    server = SidecarServer.start(
        host="127.0.0.1", port=0, db=":memory:", api_token=None, clock="real"
    )
    try:
        yield server.address
    finally:
        server.stop()


def sdk_python(sdk: str) -> Path:
    """The SDK venv's python; fails (never skips) when the env is missing: CI installs first."""
    venv = SDK_ROOT / sdk
    python = venv / "bin" / "python"
    if not python.exists() or not (venv / ".installed").exists():
        pytest.fail(
            f"SDK environment {venv} is missing or incomplete: run scripts/install-sdks.sh {sdk}",
            pytrace=False,
        )
    return python


@dataclass(frozen=True)
class AppResult:
    returncode: int | None
    result: dict[str, Any] | None
    stdout: str
    stderr: str
    timed_out: bool

    def stderr_tail(self) -> str:
        lines = self.stderr.rstrip().splitlines()[-STDERR_TAIL_LINES:]
        return "\n".join(lines) if lines else "(empty)"


def run_app(*, sdk: str, case: str, address: str) -> AppResult:
    python = sdk_python(sdk)
    cmd = [
        str(python),
        str(APPS_DIR / f"{sdk}_app.py"),
        "--address",
        address,
        "--case",
        case,
        "--timeout",
        str(APP_CASE_TIMEOUT_S),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DAPR_"))}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=APPS_DIR
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()  # by pid; the app is one process (the SDK workers are threads)
        stdout, stderr = proc.communicate()
    result = None
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                continue
            break
    return AppResult(proc.returncode, result, stdout, stderr, timed_out)


def mismatches(case: str, details: dict[str, Any]) -> list[str]:
    problems = []
    if "error" in details:
        problems.append(f"the app reported an error: {details['error']}")
    for key, want in EXPECTED[case].items():
        got = details.get(key, "<missing>")
        if isinstance(want, Pred):
            if not want.test(got):
                problems.append(f"{key}: expected {want.describe}, got {got!r}")
        elif got != want:
            problems.append(f"{key}: expected {want!r}, got {got!r}")
    return problems


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sdk", "case"),
    [pytest.param(sdk, case, id=f"{sdk}-{case}") for sdk in SDKS for case in SDK_CASES[sdk]],
)
def test_sdk_case(sdk: str, case: str, sidecar_address: str) -> None:
    app = run_app(sdk=sdk, case=case, address=sidecar_address)
    context = f"\n--- {sdk}_app.py stderr (last {STDERR_TAIL_LINES} lines) ---\n{app.stderr_tail()}"
    if app.timed_out:
        pytest.fail(f"{sdk}/{case}: app killed after {PROCESS_TIMEOUT_S} s{context}", pytrace=False)
    if app.result is None:
        pytest.fail(
            f"{sdk}/{case}: app printed no JSON result (exit {app.returncode}); "
            f"stdout={app.stdout[-2000:]!r}{context}",
            pytrace=False,
        )
    assert app.returncode == 0, f"{sdk}/{case}: app exit code {app.returncode}{context}"
    assert app.result.get("case") == case, f"result is for another case: {app.result}"
    details = app.result.get("details", {})
    problems = mismatches(case, details)
    if problems:
        pytest.fail(
            f"{sdk}/{case} on {sidecar_address}:\n  - "
            + "\n  - ".join(problems)
            + f"\n--- details ---\n{json.dumps(details, indent=2, default=str)}{context}",
            pytrace=False,
        )
