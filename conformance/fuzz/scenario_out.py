"""Findings as regression scenarios: `kind: vector` files under scenarios/regressions/.

A worker finding becomes a vector with the exact past and new events of the shrunk turn and the
reference worker's answer as the expected actions (match patterns: the fields the comparison
ignores are left out, so a pattern states exactly what was compared). The file starts with
comments naming the campaign, its seed, the difference and a `Reproduce with:` line; the
`# fuzz-target:` / `# fuzz-key:` lines let later campaigns skip what is already written.

A file is kept only if it loads and passes on the reference pair (regression scenarios run in
the normal suite); `verify` also runs it on the target's pair, where it should fail.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_wire.kinds import SUSPENSION_FIELDS, event_kind, pascal

from conformance.fuzz import programs as P
from conformance.dialects.compare import TIMER_ORIGINS, Profile
from conformance.scenario.wire import action_dict, parse_event

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "scenarios" / "regressions"


def event_data(ev: pb.HistoryEvent) -> dict[str, Any]:
    """A history event in the scenario wire form (`conformance/scenario/wire.py` parses it back)."""
    kind = event_kind(ev)
    out: dict[str, Any] = {kind.value: json_format.MessageToDict(getattr(ev, kind.field))}
    if ev.eventId != -1:
        out["eventId"] = ev.eventId
    if ev.HasField("timestamp"):
        out["timestamp"] = ev.timestamp.ToJsonString()
    return out


def round_trips(events: tuple[pb.HistoryEvent, ...] | list[pb.HistoryEvent]) -> bool:
    for i, ev in enumerate(events):
        try:
            back = parse_event(event_data(ev), index=i)
        except Exception:  # noqa: BLE001 - anything the wire form cannot say
            return False
        if back.SerializeToString(deterministic=True) != ev.SerializeToString(deterministic=True):
            return False
    return True


def _strip(node: Any, ignored: frozenset[str]) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v, ignored) for k, v in node.items() if k not in ignored}
    if isinstance(node, list):
        return [_strip(v, ignored) for v in node]
    return node


def expected_actions(resp: pb.WorkflowResponse, *, mode: str, profile: Profile) -> list[dict[str, Any]]:
    """The reference answer as match patterns, leaving out what the comparison ignores."""
    ignored = set(profile.ignored)
    if not profile.compare_error_types:
        ignored.add("errorType")
    if not profile.timer_origins:
        ignored.update(TIMER_ORIGINS)
    out = []
    failed = next((a for a in resp.actions if a.HasField("completeWorkflow")), None)
    if mode == "kind" and failed is not None and \
            failed.completeWorkflow.workflowStatus == pb.ORCHESTRATION_STATUS_FAILED:
        body: dict[str, Any] = {"workflowStatus": "ORCHESTRATION_STATUS_FAILED"}
        et = failed.completeWorkflow.failureDetails.errorType
        if profile.compare_error_types:
            prefixes = "|".join(re.escape(p) for p in profile.error_type_prefixes)
            body["failureDetails"] = {"errorType": f"re:({prefixes})?{re.escape(et)}" if prefixes else et}
        return [{"CompleteWorkflow": body}]
    for a in resp.actions:
        out.append(_strip(action_dict(a), frozenset(ignored)))
    return out


_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def mark_absent(patterns: list[dict[str, Any]], diffs: Any) -> None:
    """Where the worker set a field the reference leaves unset, the pattern says `!absent` (a pattern
    ignores keys it does not name, so the difference would not show otherwise)."""
    for path, ref, _got in diffs:
        if ref != "<absent>" or not path.startswith("actions["):
            continue
        tokens = [(name, int(i) if i else None) for name, i in _TOKEN.findall(path)]
        if len(tokens) < 3 or tokens[0] != ("actions", None) or tokens[1][1] is None:
            continue
        index, kind = tokens[1][1], tokens[2][0]
        if index >= len(patterns):
            continue
        node: Any = patterns[index].get(pascal(kind))
        rest = tokens[3:]
        if not rest or not isinstance(node, dict):
            continue
        for name, i in rest[:-1]:
            node = node.get(name) if name and isinstance(node, dict) else (
                node[i] if i is not None and isinstance(node, list) and i < len(node) else None)
            if node is None:
                break
        last_name, last_i = rest[-1]
        if isinstance(node, dict) and last_name and last_name not in PAYLOADS:
            node[last_name] = "!absent"


PAYLOADS = ("json", "raw")


def _requires(programs: Mapping[str, Any], events: list[pb.HistoryEvent], actions: list[dict[str, Any]]) -> list[str]:
    """Capabilities the vector needs: what its programs use, and what of the reference's dialect it
    states (9999-12-31 timers; timer origins and task execution ids). Action ids from 1 are not
    needed: the runner shifts them for a worker that numbers from 0 (dialects/vectors.py)."""
    need = set(P.ALL_FEATURES.capabilities_used(programs))
    kinds = {e.WhichOneof("eventType") for e in events}
    if kinds & SUSPENSION_FIELDS:
        need.add("suspend")
    text = json.dumps(actions)
    if any(e.HasField("timerCreated") and e.timerCreated.fireAt.seconds == 253402300799 for e in events) \
            or "9999-12-31" in text:
        need.add("event_wait_timer")
    if any(f'"{o}"' in text for o in TIMER_ORIGINS[1:]) or '"createTimer": {}' in text:
        need.add("timer_origins")
    if "taskExecutionId" in text:
        need.add("task_execution_id")
    return sorted(need)


def scenario_id(target: str, key: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", target.lower()).strip("-")
    return f"{slug}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def _comment(text: str) -> list[str]:
    return [f"#   {line}" if line else "#" for line in text.splitlines()]


def _answer(doc: Mapping[str, Any], case: Any) -> bytes | None:
    from taskhub_programs import ProgramError, parse_bundle
    from conformance.targets.reference import execute

    try:
        bundle = parse_bundle({"programs": doc})
    except ProgramError:
        return None
    resp = execute(bundle, instance_id=case.instance_id, past=case.past, new=case.new).response(
        instance_id=case.instance_id, completion_token="")
    return resp.SerializeToString(deterministic=True)


def reduce_program(doc: Mapping[str, Any], workflow: str, case: Any) -> dict[str, Any]:
    """The program of `workflow` without the steps this turn never reaches or that change nothing in
    the reference's answer to it (greedy: drop trailing steps, empty untaken branches, drop steps).
    A worker may still answer the reduced program differently (a step the reference skips may
    matter to it): the campaign keeps the reduction only if the worker's difference persists."""
    doc = json.loads(json.dumps(doc))
    body = doc.get(workflow)
    if not isinstance(body, dict) or "steps" not in body:
        return doc
    want = _answer(doc, case)
    if want is None:
        return doc

    def same() -> bool:
        return _answer(doc, case) == want

    steps = body["steps"]
    while steps:  # trailing steps the turn never reaches
        last = steps.pop()
        if not same():
            steps.append(last)
            break

    def branches(step_list: list[Any]) -> None:
        for st in step_list:
            for kind in ("if", "if_patched"):
                b = st.get(kind) if isinstance(st, dict) else None
                if not isinstance(b, dict):
                    continue
                for arm in ("then", "else"):
                    if b.get(arm):
                        saved = b[arm]
                        b[arm] = []
                        if not same():
                            b[arm] = saved
                            branches(saved)

    branches(steps)
    i = 0
    while i < len(steps):  # steps whose absence changes nothing
        saved = steps.pop(i)
        if same():
            continue
        steps.insert(i, saved)
        i += 1
    return doc


def render(finding: Any, *, profile: Profile, command: str, stem: str,
           source: Mapping[str, Any] | None = None) -> str:
    case = finding.case
    mode = "kind" if case.form == "mutated" else "strict"
    source = finding.bundle_doc if source is None else source
    programs = {k: v for k, v in source.items() if not k.startswith("p")}
    programs.update(P.referenced(source, finding.workflow))
    events = list(case.past) + list(case.new)
    ref = finding.raw if getattr(finding, "raw", None) is not None else finding.ref
    vector: dict[str, Any] = {
        "compare": "fuzz",  # on another SDK too, judged by that SDK's comparison profile
        "instance_id": case.instance_id,
        "past": [event_data(e) for e in case.past],
        "new": [event_data(e) for e in case.new],
    }
    if mode == "strict" or not any(a.HasField("completeWorkflow") for a in ref.actions):
        custom = ref.customStatus.value if ref.HasField("customStatus") else None
        if custom is not None or not profile.empty_custom_status_is_none:
            vector["custom_status"] = custom
        if ref.HasField("version"):  # as conformance/targets/reference.py answer_dict states it
            vector["version"] = {**({"name": ref.version.name} if ref.version.HasField("name") else {}),
                                 "patches": list(ref.version.patches)}
        if any(p == "version.name" for p, _, _ in finding.comparison.diffs) and "name" not in vector.get("version", {}):
            # The worker named a version the reference does not: say so, or the vector could not fail.
            vector["version"] = {**vector.get("version", {}), "name": "!absent"}
    vector["actions"] = expected_actions(ref, mode=mode, profile=profile)
    if mode == "strict" or not any(p == "failure kind" for p, _, _ in finding.comparison.diffs):
        mark_absent(vector["actions"], finding.comparison.diffs)
    requires = _requires(programs, events, vector["actions"])
    if finding.ref is not ref and [a.id for a in finding.ref.actions] != [a.id for a in ref.actions]:
        requires = sorted(set(requires) | {"event_wait_timer"})  # the reference reserved ids for its wait timers
    requirements = [getattr(finding, "requirement", "") or "RPL-DET-001"]
    if "NonDeterminismError" in json.dumps(json_format.MessageToDict(ref)):
        requirements.append("RPL-NDET-001")
    doc = {
        "title": f"Fuzz finding on {finding.target}: {finding.kind} ({_short(finding.signature, 90)})",
        "kind": "vector",
        "requirements": requirements,
        "applies_to": ["worker", "pair"],
        "requires": requires,
        "programs": programs,
        "vector": vector,
    }
    if not doc["requires"]:
        del doc["requires"]
    header = [
        "# yaml-language-server: $schema=../../conformance/scenario/scenario.schema.json",
        f"# Written by `conformance fuzz` on {time.strftime('%Y-%m-%d %H:%M', time.gmtime(finding.found_at))} UTC: "
        f"{finding.kind} on worker {finding.target}.",
        f"# Campaign: {command}",
        f"# Seed: {finding.seed} (round {finding.round})",
        "# Example: " + finding.example.replace("\n", " "),
        "# The turn below is the shrunk example: the reference worker answers it with the actions",
        f"# listed (compared {'by failure kind' if mode == 'kind' else 'exactly'}, as the fuzzer compares);"
        f" {finding.target} answered differently:",
        *_comment(finding.comparison.describe(limit=8)),
    ]
    if finding.flaky:
        header.append("# The difference did not show on every replay (flaky).")
    if getattr(finding, "judged", ""):
        header.append(f"# Judged: {finding.judged}.")
    if finding.stderr:
        header += ["# Worker stderr (last lines):", *_comment(finding.stderr[-1500:])]
    header += [
        *([f"# fuzz-level: {finding.level}"] if getattr(finding, "level", "") else []),
        f"# fuzz-target: {finding.target}",
        f"# fuzz-key: {finding.key}",
        f"# Reproduce with: conformance run --worker {finding.target} --scenario regressions/{stem}",
    ]
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110, default_flow_style=None)
    return "\n".join(header) + "\n" + body


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write(finding: Any, *, profile: Profile, command: str, out_dir: Path = DEFAULT_OUT,
          source: Mapping[str, Any] | None = None) -> tuple[Path | None, str]:
    """Write the finding's scenario (its programs from `source`, by default the pool it was found
    with); (path, note). The file is removed again unless it loads and passes on the reference pair."""
    if not (round_trips(finding.case.past) and round_trips(finding.case.new)):
        return None, "the turn cannot be written in the scenario wire format (kept in the report only)"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = scenario_id(finding.target, finding.key)
    path = out_dir / f"{stem}.yaml"
    path.write_text(render(finding, profile=profile, command=command, stem=stem, source=source), encoding="utf-8")
    try:
        ok, note = check_reference(path)
    except Exception as exc:  # noqa: BLE001 - the harness itself failed: keep nothing unchecked
        ok, note = False, f"the reference pair could not run it: {type(exc).__name__}: {exc}"
    if not ok:
        path.unlink()
        return None, f"not written: {note}"
    return path, note


def _root_of(path: Path) -> Path:
    for parent in path.parents:
        if parent.name == "scenarios":
            return parent
    return path.parent


def check_reference(path: Path) -> tuple[bool, str]:
    """Load the scenario and run it on the reference pair: it must pass."""
    from conformance.events import Outcome
    from conformance.runner.execute import run_scenario
    from conformance.errors import InputError
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    try:
        scenario = load_scenario(path, root=_root_of(path))
    except InputError as exc:
        return False, f"does not load: {exc.render()[:500]}"
    targets = load_targets()
    result = run_scenario(scenario, targets.pair("reference", "reference"), reproduce="fuzz check")
    if result.outcome is not Outcome.PASSED:
        return False, f"{result.outcome.value} on the reference pair: {(result.message or '')[:500]}"
    return True, "passes on the reference pair"


def verify_on(path: Path, worker: str) -> str:
    """Run the scenario on (reference sidecar, `worker`): FAILED is what a finding should show."""
    from conformance.runner.execute import run_scenario
    from conformance.scenario.loader import load_scenario
    from conformance.targets.registry import load_targets

    scenario = load_scenario(path, root=_root_of(path))
    targets = load_targets()
    result = run_scenario(scenario, targets.pair("reference", worker), reproduce="fuzz verify")
    return result.outcome.value
