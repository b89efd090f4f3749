"""The replay worker of a flow scenario whose checks replay turns on a process worker starts beside the
engine (conformance/runner/observe.py `replay_early`): its verdicts are those of a replay started when
first asked, its output goes to the scenario's log, and a scenario that replays nothing starts none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conformance.events import Outcome, ScenarioFinished
from conformance.reporting import read_events

ROOT = Path(__file__).resolve().parents[2]
WORKER = "{python} -m fake_worker --sidecar {address} --programs {programs}"
SCENARIO = """title: {title}
requirements: [RPL-DET-001]
programs: {{main: {{steps: [{{timer: 0.2s}}, {{return: 1}}]}}}}
start: {{workflow: main}}
expect: {{status: COMPLETED, output: 1}}
checks: {checks}
"""


def test_replaying_scenarios_start_their_replay_worker_early_and_log_it(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "replays.yaml").write_text(SCENARIO.format(title="replays", checks="[replay_determinism, same_item_twice]"),
                                      encoding="utf-8")
    (lib / "plain.yaml").write_text(SCENARIO.format(title="plain", checks="[]"), encoding="utf-8")
    reports = tmp_path / "reports"
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--scenarios", str(lib), "--worker", "command",
                           "--worker-command", WORKER, "--reports", str(reports), "--jobs", "2"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finished = {e.scenario: e for e in read_events(reports / "events.jsonl") if isinstance(e, ScenarioFinished)}
    assert {k: v.outcome for k, v in finished.items()} == {"replays": Outcome.PASSED, "plain": Outcome.PASSED}
    logs = {p.stem: p.read_text(encoding="utf-8") for p in (reports / "logs").rglob("*.log") if p.stem in finished}
    # Both workers' output files are the scenario's: the one under test and the replay worker (vectors/).
    assert "/vectors/command-" in logs["replays"], logs["replays"][-2000:]
    assert "/vectors/" not in logs["plain"], logs["plain"][-2000:]
