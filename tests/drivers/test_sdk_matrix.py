"""The compatibility matrix: the whole scenario library on every SDK driver (on the reference
sidecar), on the durabletask-go sidecar (with the reference worker) and on daprd (with the
reference worker and with dapr-ext-workflow: the engine and the SDK most users run), as CI runs it.

Every outcome must be explained: PASSED, WARNING (a SHOULD not met) or OBSERVATION (a difference
from the reference the contract allows), a known failure (KNOWN_FAILURE: a MUST broken that the
target declares, with reason and evidence), a capability the target lacks (NOT_APPLICABLE), or a
fuzz finding (scenarios/regressions/: FAILED on the SDK it was found on, explained in its file). Any
other FAILED or ERROR cell fails this test with the scenario's message and reproduce line. A failure
is re-run once, alone, before it counts, since third-party processes on a loaded 2-core machine
can miss a scenario's timing; a pass on the re-run is reported as flaky.

The reports (matrix.html, matrix.md, summary.json, junit.xml, allure-results) land in
reports/sdk-matrix/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.events import Outcome
from conformance.reporting import write_reports
from conformance.reporting.catalogue import load_catalogue
from conformance.reproduce import reproduce_command
from conformance.runner import Plan, run_plan
from conformance.runner.execute import run_scenario
from conformance.scenario.loader import load_all
from conformance.targets.registry import load_targets

ROOT = Path(__file__).resolve().parents[2]
SDKS = ("dapr-ext-workflow", "durabletask-dapr", "durabletask-js", "durabletask-go-worker", "durabletask-java")
# daprd's columns in CI (the other SDKs on daprd: `conformance run --sidecar daprd --worker NAME`,
# figures in docs/daprd.md); daprd has no virtual clock, so its timers take real time.
DAPRD_WORKERS = ("reference", "dapr-ext-workflow")


def _found_on(source: str) -> str | None:
    """The worker a regression scenario was found on (its `# fuzz-target:` line), if any."""
    for line in Path(source).read_text(encoding="utf-8").splitlines():
        if line.startswith("# fuzz-target:"):
            return line.split(":", 1)[1].strip()
    return None


@pytest.mark.sdk
@pytest.mark.slow
def test_compatibility_matrix(tmp_path: Path) -> None:
    targets = load_targets()
    pairs = [targets.pair("reference", sdk) for sdk in SDKS] + [targets.pair("durabletask-go", "reference")] + \
        [targets.pair("daprd", worker) for worker in DAPRD_WORKERS]
    scenarios = load_all(ROOT / "scenarios")
    plan = Plan.build(scenarios, pairs)
    plan = Plan(tuple(item for item in plan.items if item[1].direction != "self"))
    events: list = []
    results = run_plan(plan, sinks=[events.append], jobs=4, work_root=tmp_path, command="tests/drivers/test_sdk_matrix.py")
    by_id = {s.id: s for s in scenarios}
    pair_by_label = {p.label: p for p in pairs}
    flaky, unexplained, findings = [], [], []
    for r in results:
        if r.outcome is Outcome.FAILED and _found_on(by_id[r.scenario].source) == r.worker:
            # A fuzz finding on the SDK it was found on: written because it fails there (the file says
            # why) and passes on the reference pair; it stays FAILED in the matrix, where it is
            # explained. A finding failing on another SDK must be declared there as a gap.
            findings.append(f"{r.pair} {r.scenario}")
            continue
        if r.outcome in (Outcome.FAILED, Outcome.ERROR):
            pair = pair_by_label[r.pair]
            again = run_scenario(by_id[r.scenario], pair, work_root=tmp_path,
                                 reproduce=reproduce_command(r.scenario, sidecar=pair.sidecar.name,
                                                             worker=pair.worker.name))
            if again.outcome not in (Outcome.FAILED, Outcome.ERROR):
                flaky.append(f"{r.pair} {r.scenario}: {r.outcome.value} then {again.outcome.value}")
                continue
            unexplained.append(again)
        if r.outcome is Outcome.KNOWN_FAILURE and not r.gap_reason:
            unexplained.append(r)
    out = ROOT / "reports" / "sdk-matrix"
    write_reports(events=events, out_dir=out, catalogue=load_catalogue())
    counts: dict[str, dict[str, int]] = {}
    for r in results:
        counts.setdefault(r.pair, {}).setdefault(r.outcome.value, 0)
        counts[r.pair][r.outcome.value] += 1
    print(f"\nmatrix written to {out}/matrix.html")
    for label, c in sorted(counts.items()):
        print(f"  {label:<40} {c}")
    for line in flaky:
        print(f"  flaky: {line}")
    for line in findings:
        print(f"  fuzz finding (FAILED, explained in the scenario file): {line}")
    assert not unexplained, "\n\n".join(f"{r.outcome.value}: {r.scenario} on {r.pair}\n{r.message}" for r in unexplained)
