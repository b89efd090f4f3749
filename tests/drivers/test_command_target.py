"""An SDK driver run the way an SDK author runs theirs: `--worker command --worker-command ...` with its
capabilities on the command line gets the verdicts of its built-in target.

The dapr-ext-workflow driver (scripts/install-sdks.sh dx) is run both ways on scenarios whose
verdicts depend on the declaration: vectors (sent in the ids-from-1 dialect only with
ids_from_one) and flows that need event_wait_timer or timer_origins. Without the capabilities
the vector does not pass and the flows are NOT_APPLICABLE: the declaration is what makes the verdicts equal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.events import Outcome, ScenarioFinished
from conformance.reporting import read_events

ROOT = Path(__file__).resolve().parents[2]
TARGET = "dapr-ext-workflow"
COMMAND = ("{root}/.sdk/dx/bin/python {root}/drivers/dapr_ext_workflow/driver.py "
           "--sidecar {address} --programs {programs}")
SCENARIOS = ("vectors/first-turn-activity", "vectors/child-first-turn", "vectors/any-order",
             "events/raise-delivered-and-recorded", "activities/retry-policy-by-worker",
             "patching/pre-patch-history-takes-old-branch")

pytestmark = [pytest.mark.sdk, pytest.mark.slow]


def _verdicts(tmp_path: Path, name: str, *options: str) -> dict[str, Outcome]:
    reports = tmp_path / name
    selection = [a for s in SCENARIOS for a in ("--scenario", s)]
    done = subprocess.run([sys.executable, "-m", "conformance", "run", *selection, *options, "--jobs", "2",
                           "--reports", str(reports)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return {e.scenario: e.outcome for e in read_events(reports / "events.jsonl") if isinstance(e, ScenarioFinished)}


def test_command_target_with_capabilities_gets_the_built_in_verdicts(tmp_path: Path) -> None:
    declared = yaml.safe_load((ROOT / "drivers" / "dapr_ext_workflow" / "target.yaml").read_text())["workers"][TARGET]
    assert declared["command"] == COMMAND  # the same driver and SDK both ways
    built_in = _verdicts(tmp_path, "built-in", "--worker", TARGET)
    capabilities = [a for c in declared["capabilities"] for a in ("--capability", c)]
    command = _verdicts(tmp_path, "command", "--worker", "command", "--worker-command", COMMAND, *capabilities)
    assert set(built_in) == set(SCENARIOS)
    assert command == built_in
    assert set(built_in.values()) == {Outcome.PASSED}, built_in

    bare = _verdicts(tmp_path, "bare", "--worker", "command", "--worker-command", COMMAND)
    # An ids-from-0 vector to an ids-from-1 SDK: the ids differ (an OBSERVATION: ids are the worker's choice).
    assert bare["vectors/first-turn-activity"] is not Outcome.PASSED
    assert bare["events/raise-delivered-and-recorded"] is Outcome.NOT_APPLICABLE
