"""Flow-scenario fuzzing of a sidecar that is not the in-process reference (e.g. durabletask-go).

An example is a generated flow scenario: a random program (short timers only: flows run on real
time), a start, a few harness steps (raise, suspend, resume, sleep), then terminate and wait for
the end. Checks: the always-on ones (expectations, history_well_formed) plus replay_determinism,
and the `record` activity's ledger (nothing lost). The scenario runs on the reference pair and on
(target sidecar, reference worker); a finding is a scenario that passes on the reference pair and
fails (or errors) on the target. Hypothesis shrinks the scenario; the shrunk one is written under
scenarios/regressions/ as it ran (it passes on the reference pair by construction).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from conformance.fuzz import programs as P
from conformance.fuzz.campaign import CampaignResult, fuzz_command
from conformance.fuzz.common import (
    Clock, Progress, configured, finding_error, hypothesis_settings, key, seed_for,
)
from conformance.verdict import Outcome

FLOW_FEATURES = P.Features(patching=False, versions=False, retries=False, children=True, timers=True, events=True,
                           carry_events=True, suspend=True, continue_as_new=True)


@dataclass
class FlowFinding:
    target: str
    signature: str
    doc: dict[str, Any]
    message: str
    seed: int
    scenario_path: Path | None = None
    verified: str = ""
    flaky: bool = False
    found_at: float = field(default_factory=time.time)

    def headline(self) -> str:
        return f"flow on sidecar {self.target}: {self.signature}"

    @property
    def key(self) -> str:
        return f"flow: {self.signature}"


@st.composite
def flow_docs(draw: Any) -> dict[str, Any]:
    old = P.DURATIONS, P.TIMEOUTS
    P.DURATIONS, P.TIMEOUTS = (0, "200ms", "500ms"), (0, "300ms")  # real time: keep flows short
    try:
        body = draw(P.program_docs(FLOW_FEATURES))
    finally:
        P.DURATIONS, P.TIMEOUTS = old
    steps: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["raise", "raise", "suspend", "resume", "sleep"]))
        if kind == "raise":
            steps.append({"raise": {"event": draw(st.sampled_from(P.EVENT_NAMES)),
                                    "data": draw(st.sampled_from([1, "yes", None, {"k": 1}]))}})
        elif kind == "sleep":
            steps.append({"sleep": draw(st.sampled_from(["100ms", "300ms"]))})
        else:
            steps.append({kind: {}})
    steps.append({"sleep": "300ms"})
    steps.append({"terminate": {"output": "stop"}, "expect_error": None})
    steps.append({"wait": {"status": ["COMPLETED", "FAILED", "TERMINATED"], "timeout": "10s"}})
    for s in steps:
        s.pop("expect_error", None)
    return {
        "title": "fuzz flow",
        "requirements": ["HIST-ONCE-001"],
        "applies_to": ["engine", "pair"],
        "programs": P.bundle_doc({"main": body}, FLOW_FEATURES),
        "start": {"workflow": "main", "input": draw(st.sampled_from([0, 1, "a"]))},
        "steps": steps,
        "checks": ["replay_determinism"],
        "ledger": {"lost": 0, "unexpected": 0},
        "timeout": "10s",
    }


def _run(doc: dict[str, Any], pair: Any, work: Path) -> tuple[Outcome, str]:
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario

    root = work / "scenarios"
    (root / "fuzz").mkdir(parents=True, exist_ok=True)
    path = root / "fuzz" / f"flow-{hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    scenario = load_scenario(path, root=root)
    result = run_scenario(scenario, pair, work_root=work, reproduce="fuzz flow")
    return result.outcome, result.message or ""


def _signature(message: str) -> str:
    first = next((line.strip() for line in message.splitlines() if line.strip().startswith("- ")), message[:120])
    first = first.removeprefix("- ")
    head = message.split(":", 1)[0] if message else "?"
    import re

    return f"{head}: " + re.sub(r"[0-9a-f]{8,}|\d+", "N", first)[:120]


def run_flow_campaign(args: Any, target: Any, budget: Any, database: Path | None, out: Any) -> Any:
    from conformance.fuzz.scenario_out import DEFAULT_OUT, check_reference
    from conformance.targets.registry import load_targets

    result = CampaignResult(label=f"sidecar {target.name} (flows)", kind="flows")
    result.notes.append("generated flow scenarios on (target, reference worker) vs the reference pair; checks: "
                        "history_well_formed, replay_determinism, ledger")
    targets = load_targets()
    ref_pair = targets.pair("reference", "reference")
    pair = targets.pair(target.name, "reference")
    work = Path(tempfile.mkdtemp(prefix="conformance-fuzz-flows-"))
    clock = Clock(budget)
    progress = Progress(f"sidecar {target.name}", out, every=10)
    known: set[str] = set()
    findings: list[FlowFinding] = []
    began = time.monotonic()
    chunk_no = 0
    while not clock.exhausted():
        pending: dict[str, FlowFinding] = {}

        @given(flow_docs())
        def example(doc: dict[str, Any]) -> None:
            if clock.hard_stop():
                return
            clock.examples += 1
            progress.tick(clock, findings=len(findings))
            ref_outcome, ref_msg = _run(doc, ref_pair, work)
            if ref_outcome is not Outcome.PASSED:
                progress.count("skipped-reference-fails")
                return  # only flows the reference pair passes say something about the target
            progress.count("compared")
            outcome, msg = _run(doc, pair, work)
            if outcome in (Outcome.FAILED, Outcome.ERROR):
                f = FlowFinding(target=target.name, signature=_signature(msg), doc=doc, message=msg, seed=args.seed)
                if f.key in known:
                    return
                pending[f.key] = f
                raise finding_error(f.key)(f)

        example = configured(example, seed=seed_for("flows", args.seed, chunk_no), with_settings=hypothesis_settings(
            max_examples=min(10, clock.remaining_examples(10)), database=database, share=key("flows", target.name)))
        try:
            example()
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - findings are in `pending`
            if not pending:
                raise
        for f in pending.values():
            known.add(f.key)
            findings.append(f)
            progress.say(f"finding {len(findings)}: {f.headline()}")
            if not args.no_write:
                out_dir = args.out or DEFAULT_OUT
                out_dir.mkdir(parents=True, exist_ok=True)
                stem = f"flow-{target.name}-{hashlib.sha1(f.key.encode()).hexdigest()[:10]}"
                doc = dict(f.doc, title=f"Fuzz finding on sidecar {target.name}: {f.signature}"[:150])
                path = out_dir / f"{stem}.yaml"
                header = ["# yaml-language-server: $schema=../../conformance/scenario/scenario.schema.json",
                          f"# Written by `conformance fuzz`: flow {target.name} fails, the reference pair passes.",
                          f"# Campaign: {fuzz_command(args, sidecar=target.name)}", f"# Seed: {args.seed}",
                          f"# fuzz-target: {target.name}", f"# fuzz-key: {f.key}",
                          *[f"#   {line}" for line in f.message.splitlines()[:12]],
                          f"# Reproduce with: conformance run --sidecar {target.name} --scenario regressions/{stem}"]
                path.write_text("\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                                encoding="utf-8")
                ok, note = check_reference(path)
                if not ok:
                    path.unlink()
                    f.verified = f"not written: {note}"
                else:
                    f.scenario_path, f.verified = path, note
        chunk_no += 1
    result.findings = findings
    result.notes.append(", ".join(f"{k} {v}" for k, v in sorted(progress.counters.items())) or "nothing compared")
    result.examples = clock.examples
    result.seconds = time.monotonic() - began
    return result
