"""What an SDK author needs beside a failure's mismatches to act on it without opening the repository:
for a vector, the program, the turn's history and the actions expected and answered; for any worker
that runs as a process, the last lines it logged (the SDK's own log of that turn).

Text only, written once per failed scenario; the mismatches themselves stay data (conformance.failures).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from taskhub_core.incidents import Incident

_PROGRAM_LINES = 30
_LOG_LINES = 25
_LOG_LINE_CHARS = 300


def _line_of(path: str, key: str) -> int:
    """The 1-based line where the top-level `key:` is written in `path` (0 if unknown)."""
    try:
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith(f"{key}:"):
                return n
    except OSError:
        pass
    return 0


def _event(ev: Any) -> str:
    """One history event on a line: its kind, name and id, with its payload and timestamp when it has them."""
    from conformance.replay.judge import describe_event

    text = describe_event(ev)
    kind = ev.WhichOneof("eventType")
    body = getattr(ev, kind) if kind else None
    for name in ("input", "result", "fireAt"):
        if body is not None and name in type(body).DESCRIPTOR.fields_by_name and body.HasField(name):
            value = getattr(body, name)
            shown = value.ToJsonString() if name == "fireAt" else getattr(value, "value", value)
            if f"{name}=" not in text:
                text += f" {name}={shown}"
    failure = getattr(body, "failureDetails", None) if body is not None else None
    if failure is not None and body.HasField("failureDetails") and "taskFailed" in (kind or ""):
        text += f" {failure.errorType}: {failure.errorMessage}"
    if ev.HasField("timestamp") and kind == "workflowStarted":
        text += f" at {ev.timestamp.ToJsonString()}"
    return text


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


def vector_context(scenario: Any, *, answer: Mapping[str, Any] | None,
                   expected: Sequence[Any] | None = None) -> str:
    """The vector's program, the turn (history already played, then the new events) and both answers."""
    vec = scenario.vector
    if vec is None:
        return ""
    import os

    source = os.path.abspath(scenario.source)  # readable from wherever the report is read
    lines = [f"The turn ({scenario.id}, {source}:{_line_of(source, 'vector') or 1}):"]
    program = yaml.safe_dump(dict(scenario.programs_doc), sort_keys=False, allow_unicode=True,
                             default_flow_style=None, width=100).splitlines()
    at = _line_of(source, "programs")
    lines.append(f"  programs ({source}:{at}):" if at else "  programs:")
    lines += [f"    {l}" for l in program[:_PROGRAM_LINES]]
    if len(program) > _PROGRAM_LINES:
        lines.append(f"    ... ({len(program) - _PROGRAM_LINES} more lines in the file)")
    lines.append(f"  history already played (instance {vec.instance_id}):")
    lines += [f"    #{i:<3} {_event(e)}" for i, e in enumerate(vec.past)] or ["    (none: the first turn)"]
    lines.append("  new events of this turn:")
    lines += [f"    #{len(vec.past) + i:<3} {_event(e)}" for i, e in enumerate(vec.new)]
    want = list(expected if expected is not None else vec.actions)
    lines.append(f"  expected {len(want)} action(s):")
    lines += [f"    {_compact(a)}" for a in want] or ["    (none)"]
    if answer is None:
        lines.append("  answered: nothing (no answer within the time allowed)")
    else:
        got = list(answer.get("actions") or [])
        lines.append(f"  answered {len(got)} action(s):")
        lines += [f"    {_compact(a)}" for a in got] or ["    (none)"]
        if answer.get("custom_status") not in (None, ""):
            lines.append(f"    custom status {_compact(answer.get('custom_status'))}")
    return "\n".join(lines)


def worker_log(work_dir: Path, worker: str) -> str:
    """The last lines the worker process wrote (stderr, then stdout), as the SDK logged them."""
    blocks = []
    for stream in ("stderr", "stdout"):
        files = sorted(work_dir.rglob(f"{worker}-*.{stream}.log"))
        text = "".join(f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file())
        tail = [l if len(l) <= _LOG_LINE_CHARS else l[:_LOG_LINE_CHARS] + "…" for l in text.splitlines()[-_LOG_LINES:]]
        if tail:
            blocks.append(f"The worker's {stream} ({worker}, last {len(tail)} line(s)):\n" +
                          "\n".join(f"  | {l}" for l in tail))
    return "\n".join(blocks)


_ENGINE_LOG_LINES = 12
# Words of an engine's log line that say it refused, redelivered or dropped something.
_INCIDENT_WORDS = re.compile(r"stale|already|abandon|duplicate|refus|redeliver|retry|zombie|drop|ignor|warn|error",
                             re.I)


def incidents_text(incidents: Sequence[Incident]) -> str:
    """"Engine incidents for instance X:" and one line per incident, per instance (the failure text's and
    the allure attachment's block)."""
    by_instance: dict[str, list[str]] = {}
    for i in incidents:
        by_instance.setdefault(i.instance, []).append(f"  - {i.line()}")
    return "\n".join(f"Engine incidents for instance {iid}:\n" + "\n".join(lines) for iid, lines in by_instance.items())


def engine_incidents(incidents: Mapping[str, Sequence[Incident]] | None, *, sidecar: str, logs: Sequence[str] = (),
                     instances: Sequence[str] = ()) -> str:
    """What the engine refused, redelivered or dropped, per instance ("Engine incidents for instance X: ...").
    An engine that keeps no record (daprd, durabletask-go): the lines of its captured log that name one of
    the scenario's instances and read like an incident, or a plain statement that none are available."""
    if incidents is not None:
        if not incidents:
            return f"Engine incidents: none recorded by sidecar {sidecar} for this scenario's instances."
        return incidents_text([i for found in incidents.values() for i in found])
    lines = []
    for path in logs:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines += [l.strip()[:_LOG_LINE_CHARS] for l in text.splitlines()
                  if any(iid in l for iid in instances) and _INCIDENT_WORDS.search(l)]
    if lines:
        tail = lines[-_ENGINE_LOG_LINES:]
        return (f"Engine incidents: sidecar {sidecar} keeps no record of them; its log's last {len(tail)} line(s) "
                "naming this scenario's instances:\n" + "\n".join(f"  | {l}" for l in tail))
    return f"Engine incidents: none available (sidecar {sidecar} keeps no record of refused, redelivered or dropped work" \
           + (", and its log names none of this scenario's instances)." if logs else ").")


def failure_context(scenario: Any, *, worker: str, work_dir: Path, observed: Any = None, provenance: str = "",
                    engine: str = "") -> str:
    """The text that follows a failure's mismatches: the engine's incidents, the vector's turn, the SDK's log
    lines, which SDK build ran."""
    parts = [engine]
    if scenario.kind == "vector":
        parts.append(vector_context(scenario, answer=getattr(observed, "answer", None),
                                    expected=getattr(observed, "expected", None)))
    parts.append(worker_log(work_dir, worker))
    parts.append(provenance)
    return "".join(f"\n\n{p}" for p in parts if p)


__all__ = ["engine_incidents", "failure_context", "incidents_text", "vector_context", "worker_log"]
