"""Allure results, written directly in allure's results format (no pytest needed).

One `<uuid>-result.json` per ScenarioFinished:

- status: PASSED, WARNING, OBSERVATION -> passed (the latter two with what differs), FAILED -> failed,
  ERROR -> broken, KNOWN_FAILURE / NOT_APPLICABLE -> skipped
- labels: parentSuite = pair, suite = area of the first requirement (also the feature), subSuite =
  the scenario's folder, so allure's Suites tab groups by pair, then area; story = scenario, a tag
  per requirement id (and `gap-passed` for a declared gap that passed), severity from the strongest
  requirement level (MUST -> critical, SHOULD -> normal, MAY -> minor)
- name: the scenario's title; a fuzz finding's generated title ("Fuzz finding on SDK: kind (...)",
  alike and cut short across findings) becomes "kind on SDK [key]: difference", unique by its key
- attachments: the protocol transcript (text/plain, one line per message), the transcript as
  JSON, and a timeline picture (image/svg+xml)

plus `environment.properties` (run id, pairs, command) and `categories.json` (one category per
non-passing outcome). `allure generate` / `allure serve` read the directory as they read
allure-pytest's. Start and stop times are laid end to end from the run's start (the events carry
durations, not start times), so allure's timeline shows the run as if sequential.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conformance.events import Event, Outcome, RunFinished, RunStarted, ScenarioFinished
from conformance.failures import reproduce_block
from conformance.reporting.catalogue import Catalogue, strongest_level
from conformance.reporting.model import UNCATALOGUED_AREA, failure_text, reason, transcript_text
from conformance.reporting.timeline import render_timeline

STATUS = {
    Outcome.PASSED: "passed",
    Outcome.FAILED: "failed",
    Outcome.ERROR: "broken",
    Outcome.KNOWN_FAILURE: "skipped",
    Outcome.WARNING: "passed",
    Outcome.OBSERVATION: "passed",
    Outcome.NOT_APPLICABLE: "skipped",
}
SEVERITY = {"MUST": "critical", "SHOULD": "normal", "MAY": "minor"}
CATEGORIES = [
    {"name": "Conformance failures (the target breaks a requirement)", "matchedStatuses": ["failed"]},
    {"name": "Errors (the harness or the target could not run the scenario)", "matchedStatuses": ["broken"]},
    {"name": "Known failures (declared gaps)", "matchedStatuses": ["skipped"], "messageRegex": "(?s)known failure:.*"},
    {"name": "Not applicable (capability absent)", "matchedStatuses": ["skipped"], "messageRegex": "(?s)not applicable:.*"},
]
_NAMESPACE = uuid.UUID("3c1e5f0a-8a43-4c0e-9d1c-2b7f2f6a9e11")
_OWN_FILES = ("*-result.json", "*-container.json", "*-attachment.*", "environment.properties", "categories.json")


class AllureWriter:
    """An event handler that writes allure results into `out_dir` as the run goes."""

    def __init__(self, out_dir: Path, *, catalogue: Catalogue, clean: bool = True) -> None:
        self.out_dir = Path(out_dir)
        self.catalogue = catalogue
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if clean:  # results of an earlier run would be merged into this one by allure
            for pattern in _OWN_FILES:
                for stale in self.out_dir.glob(pattern):
                    stale.unlink()
        self._run_id = ""
        self._pairs: list[str] = []
        self._command = ""
        self._started_at: float | None = None
        self._cursor_ms: int | None = None
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def handle(self, event: Event) -> None:
        with self._lock:  # the runner calls its sinks from several scenario threads
            self._handle(event)

    def _handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._run_id = event.run_id
            self._pairs = list(event.pairs)
            self._command = event.command
            self._started_at = event.started_at
            self._cursor_ms = int(event.started_at * 1000)
            self._write_environment()
            _write_json(self.out_dir / "categories.json", CATEGORIES)
        elif isinstance(event, ScenarioFinished):
            if event.pair not in self._pairs:
                self._pairs.append(event.pair)
            self._write_result(event)
        elif isinstance(event, RunFinished):
            self._run_id = self._run_id or event.run_id
            self._write_environment()
            if not (self.out_dir / "categories.json").exists():
                _write_json(self.out_dir / "categories.json", CATEGORIES)

    # -------------------------------------------------------------------------------- internals

    def _write_environment(self) -> None:
        props = {"run_id": self._run_id, "pairs": ", ".join(self._pairs)}
        if self._command:
            props["command"] = self._command
        if self._started_at is not None:
            props["started"] = datetime.fromtimestamp(self._started_at, UTC).isoformat(timespec="seconds")
        text = "".join(f"{_prop_escape(k, key=True)} = {_prop_escape(v)}\n" for k, v in props.items())
        (self.out_dir / "environment.properties").write_text(text, encoding="utf-8")

    def _write_result(self, r: ScenarioFinished) -> None:
        key = (r.pair, r.scenario)
        occurrence = self._seen.get(key, 0)
        self._seen[key] = occurrence + 1
        result_uuid = str(uuid.uuid5(_NAMESPACE, f"{self._run_id}/{r.pair}/{r.scenario}/{occurrence}"))
        if self._cursor_ms is None:
            self._cursor_ms = int(time.time() * 1000)
        start = self._cursor_ms
        stop = start + max(0, round(r.duration_s * 1000))
        self._cursor_ms = stop

        result: dict[str, Any] = {
            "uuid": result_uuid,
            "historyId": _md5(f"{r.scenario}|{r.pair}"),
            "testCaseId": _md5(r.scenario),
            "fullName": f"{r.scenario}[{r.pair}]",
            "name": display_name(r),
            "status": STATUS[r.outcome],
            "stage": "finished",
            "description": self._description(r),
            "start": start,
            "stop": stop,
            "labels": self._labels(r),
            "links": [],
            "parameters": [{"name": k, "value": v} for k, v in (("pair", r.pair), ("sidecar", r.sidecar), ("worker", r.worker))],
            "attachments": self._attachments(r, result_uuid),
            "steps": [],
        }
        details = self._status_details(r)
        if details:
            result["statusDetails"] = details
        _write_json(self.out_dir / f"{result_uuid}-result.json", result)

    def _labels(self, r: ScenarioFinished) -> list[dict[str, str]]:
        area = UNCATALOGUED_AREA
        if r.requirements and (first := self.catalogue.get(r.requirements[0])):
            area = first.area
        labels = [{"name": "parentSuite", "value": r.pair}, {"name": "suite", "value": area},
                  {"name": "subSuite", "value": r.scenario.split("/")[0] if "/" in r.scenario else r.scenario}]
        if r.requirements:
            labels.append({"name": "feature", "value": area})
        labels.append({"name": "story", "value": r.scenario})
        labels += [{"name": "tag", "value": rid} for rid in dict.fromkeys(r.requirements)]
        if r.gap_passed:
            labels.append({"name": "tag", "value": "gap-passed"})
        levels = [req.level for rid in r.requirements if (req := self.catalogue.get(rid))]
        labels.append({"name": "severity", "value": SEVERITY.get(strongest_level(levels) or "SHOULD", "normal")})
        labels.append({"name": "framework", "value": "taskhub-conformance"})
        return labels

    def _status_details(self, r: ScenarioFinished) -> dict[str, str] | None:
        if r.outcome in (Outcome.FAILED, Outcome.ERROR):
            return {"message": failure_text(r)}
        if r.outcome is Outcome.KNOWN_FAILURE:
            return {"message": f"known failure: {reason(r) or 'no reason given'}", "trace": failure_text(r)}
        if r.outcome in (Outcome.WARNING, Outcome.OBSERVATION):
            return {"message": failure_text(r)}
        if r.outcome is Outcome.NOT_APPLICABLE:
            return {"message": f"not applicable: {reason(r) or 'no reason given'}"}
        if r.gap_passed:
            return {"message": reason(r)}
        return None

    def _description(self, r: ScenarioFinished) -> str:
        lines = []
        for rid in r.requirements:
            req = self.catalogue.get(rid)
            if req is None:
                lines.append(f"- {rid} (not in the catalogue)")
            else:
                lines.append(f"- {rid} ({req.level}) {req.title}: {req.text}")
        parts = []
        if display_name(r) != (r.title or r.scenario):
            parts.append(f"Scenario {r.scenario}: {r.title}")
        if lines:
            parts.append("Requirements:\n" + "\n".join(lines))
        if r.source:
            parts.append(f"Scenario file: {r.source}")
        if r.reproduce:
            parts.append(reproduce_block(r.reproduce))
        return "\n\n".join(parts)

    def _attachments(self, r: ScenarioFinished, result_uuid: str) -> list[dict[str, str]]:
        if not r.transcript:
            return []
        title = f"{r.scenario} on {r.pair}: {r.outcome.value}"
        files = [
            ("protocol transcript", "text/plain", "txt", transcript_text(r.transcript)),
            (
                "protocol transcript (JSON)",
                "application/json",
                "json",
                json.dumps([asdict(e) for e in r.transcript], indent=2, default=str),
            ),
            ("timeline", "image/svg+xml", "svg", render_timeline(r.transcript, title=title)),
        ]
        out = []
        for name, mime, ext, content in files:
            source = f"{uuid.uuid5(_NAMESPACE, f'{result_uuid}/{name}')}-attachment.{ext}"
            (self.out_dir / source).write_text(content, encoding="utf-8")
            out.append({"name": name, "source": source, "type": mime})
        return out


_FINDING_TITLE = re.compile(r"Fuzz finding on (?P<target>[^:]+): (?P<kind>[\w-]+)(?: \((?P<what>.*)\))?$", re.S)


def display_name(r: ScenarioFinished) -> str:
    """A result's title in allure: readable, and distinct for fuzz findings (see the module docstring)."""
    title = r.title or r.scenario
    m = _FINDING_TITLE.match(title)
    if not m:
        return title
    key = r.scenario.rsplit("-", 1)[-1] if "-" in r.scenario else r.scenario
    what = f": {m['what']}" if m["what"] else ""
    return f"{m['kind']} on {m['target']} [{key}]{what}"


def write_allure(events: Iterable[Event], out_dir: Path, *, catalogue: Catalogue) -> Path:
    writer = AllureWriter(out_dir, catalogue=catalogue)
    for event in events:
        writer.handle(event)
    if not (writer.out_dir / "categories.json").exists():  # a stream without RunStarted/RunFinished
        writer.handle(RunFinished(run_id="", finished_at=0.0, duration_s=0.0, counts={}))
    return writer.out_dir


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _prop_escape(text: str, *, key: bool = False) -> str:
    """Escape for a Java .properties file (what allure reads environment.properties as)."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif (key and ch in "=:#! ") or (ch == " " and i == 0):
            out.append("\\" + ch)
        elif ord(ch) > 0x7E:  # \uXXXX, a surrogate pair beyond the BMP
            units = ch.encode("utf-16-be")
            out.append("".join(f"\\u{int.from_bytes(units[j : j + 2], 'big'):04x}" for j in range(0, len(units), 2)))
        else:
            out.append(ch)
    return "".join(out)
