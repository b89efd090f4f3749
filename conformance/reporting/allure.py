"""Allure results: what one scenario result says in allure's terms, written by allure's own code.

`scenario_case` turns a `ScenarioFinished` into an `AllureCase` (the one description of a result in
allure's vocabulary); two thin edges hand it to allure-python (allure-pytest's commons library):

- `AllureWriter` (the `conformance run` path) writes each case with `allure_commons`'
  `AllureFileLogger`, the writer allure-pytest itself uses;
- `annotate_pytest_item` (the pytest path) gives the same labels, description, parameters and
  attachments to the running pytest item through allure's dynamic API, and allure-pytest writes it.

So both paths produce the same results and no code of ours writes allure's JSON. The case:

- status: PASSED, WARNING, OBSERVATION -> passed (the latter two with what differs), FAILED -> failed,
  ERROR -> broken, KNOWN_FAILURE / NOT_APPLICABLE -> skipped (in the pytest path the item's own
  outcome makes the same status)
- labels: parentSuite = pair, suite = area of the first requirement (also the feature), subSuite =
  the scenario's folder, so allure's Suites tab groups by pair, then area; story = scenario, a tag
  per requirement id (and `gap-passed` for a declared gap that passed), severity from the strongest
  requirement level (MUST -> critical, SHOULD -> normal, MAY -> minor)
- name: the scenario's title; a fuzz finding's generated title ("Fuzz finding on SDK: kind (...)",
  alike and cut short across findings) becomes "kind on SDK [key]: difference", unique by its key
- attachments: the protocol transcript (text/plain, one line per message), the transcript as
  JSON, and a timeline picture (image/svg+xml)
- start and stop: the scenario's real wall-clock times

plus `environment.properties` (run id, pairs, command) and `categories.json` (one category per
non-passing outcome), which allure reads beside the results.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
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


@dataclass(frozen=True, slots=True)
class AllureAttachment:
    name: str
    mime: str
    ext: str
    body: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AllureCase:
    """One result in allure's vocabulary, whichever path writes it."""

    uuid: str
    full_name: str
    name: str
    status: str  # allure's: passed | failed | broken | skipped
    message: str = ""
    trace: str = ""
    description: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()
    attachments: tuple[AllureAttachment, ...] = ()
    start_ms: int = 0
    stop_ms: int = 0

    @property
    def history_id(self) -> str:
        """allure-pytest's own history id of a test with these name and parameters, so a scenario's history
        in allure runs on across both paths."""
        from allure_pytest.utils import get_history_id

        return get_history_id(self.full_name, self.allure_parameters(), original_values={})

    def allure_parameters(self) -> list[Any]:
        """The parameters as allure's API records them (`allure.dynamic.parameter` writes a value's repr)."""
        from allure_commons.model2 import Parameter
        from allure_commons.utils import represent

        return [Parameter(name=n, value=represent(v)) for n, v in self.parameters]


def scenario_case(r: ScenarioFinished, *, catalogue: Catalogue, occurrence: int = 0, run_id: str = "",
                  failing: frozenset[Outcome] = frozenset()) -> AllureCase:
    """The allure description of one scenario's result on one pair. `failing`: the outcomes the run fails on
    (`--fail-on`); a warning, observation or known failure among them is `failed`, as its pytest item is."""
    start = round((r.started_at or time.time() - r.duration_s) * 1000)
    message, trace = _status_details(r)
    return AllureCase(
        uuid=str(uuid.uuid5(_NAMESPACE, f"{run_id}/{r.pair}/{r.scenario}/{occurrence}")),
        full_name=f"{r.scenario}[{r.pair}]",
        name=display_name(r),
        status="failed" if r.outcome in failing and STATUS[r.outcome] in ("passed", "skipped") else STATUS[r.outcome],
        message=message,
        trace=trace,
        description=_description(r, catalogue),
        labels=_labels(r, catalogue),
        parameters=(("pair", r.pair), ("sidecar", r.sidecar), ("worker", r.worker)),
        attachments=_attachments(r),
        start_ms=start,
        stop_ms=start + max(0, round(r.duration_s * 1000)),
    )


def _labels(r: ScenarioFinished, catalogue: Catalogue) -> tuple[tuple[str, str], ...]:
    area = UNCATALOGUED_AREA
    if r.requirements and (first := catalogue.get(r.requirements[0])):
        area = first.area
    folder = r.scenario.split("/")[0] if "/" in r.scenario else r.scenario
    labels = [("parentSuite", r.pair), ("suite", area), ("subSuite", folder)]
    if r.requirements:
        labels.append(("feature", area))
    labels.append(("story", r.scenario))
    labels += [("tag", rid) for rid in dict.fromkeys(r.requirements)]
    if r.gap_passed:
        labels.append(("tag", "gap-passed"))
    levels = [req.level for rid in r.requirements if (req := catalogue.get(rid))]
    labels.append(("severity", SEVERITY.get(strongest_level(levels) or "SHOULD", "normal")))
    return tuple(labels)


def _status_details(r: ScenarioFinished) -> tuple[str, str]:
    if r.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.WARNING, Outcome.OBSERVATION):
        return failure_text(r), ""
    if r.outcome is Outcome.KNOWN_FAILURE:
        return f"known failure: {reason(r) or 'no reason given'}", failure_text(r)
    if r.outcome is Outcome.NOT_APPLICABLE:
        return f"not applicable: {reason(r) or 'no reason given'}", ""
    if r.gap_passed:
        return reason(r), ""
    return "", ""


def _description(r: ScenarioFinished, catalogue: Catalogue) -> str:
    lines = []
    for rid in r.requirements:
        req = catalogue.get(rid)
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


def _attachments(r: ScenarioFinished) -> tuple[AllureAttachment, ...]:
    # What the engine refused, redelivered or dropped: the root cause beside the mismatches, for any result
    # that is not a pass (a passing scenario may provoke incidents on purpose).
    from conformance.failure_context import incidents_text

    incidents: tuple[AllureAttachment, ...] = ()
    if r.incidents and r.outcome is not Outcome.PASSED:
        incidents = (AllureAttachment("engine incidents", "text/plain", "txt", incidents_text(r.incidents)),)
    if not r.transcript:
        return incidents
    title = f"{r.scenario} on {r.pair}: {r.outcome.value}"
    return incidents + (
        AllureAttachment("protocol transcript", "text/plain", "txt", transcript_text(r.transcript)),
        AllureAttachment("protocol transcript (JSON)", "application/json", "json",
                         json.dumps([asdict(e) for e in r.transcript], indent=2, default=str)),
        AllureAttachment("timeline", "image/svg+xml", "svg", render_timeline(r.transcript, title=title)),
    )


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


# ------------------------------------------------------------------------------------ the two edges


def write_case(case: AllureCase, out_dir: Path) -> Path:
    """Write `case` into an allure results folder with allure-python's own file writer."""
    from allure_commons.logger import AllureFileLogger
    from allure_commons.model2 import Attachment, Label, StatusDetails, TestResult
    from allure_commons.utils import md5

    logger = AllureFileLogger(out_dir)
    attachments = []
    for a in case.attachments:
        source = f"{uuid.uuid5(_NAMESPACE, f'{case.uuid}/{a.name}')}-attachment.{a.ext}"
        logger.report_attached_data(body=a.body, file_name=source)
        attachments.append(Attachment(name=a.name, source=source, type=a.mime))
    details = StatusDetails(message=case.message, trace=case.trace or None) if case.message else None
    logger.report_result(TestResult(
        uuid=case.uuid, historyId=case.history_id, testCaseId=md5(case.full_name), fullName=case.full_name,
        name=case.name, status=case.status, statusDetails=details, stage="finished",
        description=case.description or None, start=case.start_ms, stop=case.stop_ms,
        labels=[Label(name=n, value=v) for n, v in (*case.labels, ("framework", "taskhub-conformance"))],
        parameters=case.allure_parameters(), attachments=attachments))
    return out_dir


def annotate_pytest_item(case: AllureCase) -> None:
    """Give the running pytest item `case`'s title, description, labels, parameters and attachments
    through allure's dynamic API (allure-pytest records them when it is active, i.e. with --alluredir).
    The status, start and stop are the item's own."""
    import allure

    allure.dynamic.title(case.name)
    if case.description:
        allure.dynamic.description(case.description)
    for name, value in case.labels:
        allure.dynamic.label(name, value)
    for name, value in case.parameters:
        allure.dynamic.parameter(name, value)
    for a in case.attachments:
        allure.attach(a.body, name=a.name, attachment_type=_attachment_type(a))


def finish_pytest_item(config: Any, case: AllureCase) -> None:
    """After the item's call (its teardown): give allure-pytest's result for it what the dynamic API cannot
    say: the scenario's own start and stop (an item run ahead of time finished before pytest reached it,
    and allure-pytest would time pytest's taking of the result), the status message and trace the CLI
    writes (allure-pytest's is the exception's, `ScenarioFailed: ...`, or `Skipped: ...`), and the
    case's full name and test case id (allure-pytest derives them from the node id; its history id
    follows from the full name once the teardown ends)."""
    from allure_commons.model2 import StatusDetails
    from allure_commons.utils import md5

    listener = config.pluginmanager.get_plugin("allure_listener")
    result = listener.allure_logger.get_test(None) if listener is not None else None
    if result is None:
        return
    result.start, result.stop = case.start_ms, case.stop_ms
    result.fullName, result.testCaseId = case.full_name, md5(case.full_name)
    if case.message:
        result.statusDetails = StatusDetails(message=case.message, trace=case.trace or None)


def _attachment_type(a: AllureAttachment) -> Any:
    from allure_commons.types import AttachmentType

    return {"text/plain": AttachmentType.TEXT, "application/json": AttachmentType.JSON,
            "image/svg+xml": AttachmentType.SVG}.get(a.mime, AttachmentType.TEXT)


def write_run_files(out_dir: Path, *, run_id: str, pairs: Sequence[str], command: str = "",
                    started_at: float | None = None) -> None:
    """environment.properties and categories.json: what allure reads beside the results of a run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    props = {"run_id": run_id, "pairs": ", ".join(pairs)}
    if command:
        props["command"] = command
    if started_at is not None:
        props["started"] = datetime.fromtimestamp(started_at, UTC).isoformat(timespec="seconds")
    text = "".join(f"{_prop_escape(k, key=True)} = {_prop_escape(v)}\n" for k, v in props.items())
    (out_dir / "environment.properties").write_text(text, encoding="utf-8")
    (out_dir / "categories.json").write_text(json.dumps(CATEGORIES, indent=2) + "\n", encoding="utf-8")


def clean_results(out_dir: Path) -> None:
    """Remove an earlier run's results (allure would merge them into this one); other files stay."""
    for pattern in _OWN_FILES:
        for stale in out_dir.glob(pattern):
            stale.unlink()


class AllureWriter:
    """An event handler that writes allure results into `out_dir` as the run goes (`conformance run`)."""

    def __init__(self, out_dir: Path, *, catalogue: Catalogue, clean: bool = True,
                 failing: frozenset[Outcome] = frozenset()) -> None:
        self.out_dir = Path(out_dir)
        self.catalogue = catalogue
        self.failing = failing
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if clean:
            clean_results(self.out_dir)
        self._run_id = ""
        self._pairs: list[str] = []
        self._command = ""
        self._started_at: float | None = None
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def handle(self, event: Event) -> None:
        with self._lock:  # the runner calls its sinks from several scenario threads
            self._handle(event)

    def _handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._run_id, self._pairs = event.run_id, list(event.pairs)
            self._command, self._started_at = event.command, event.started_at
            self._write_run_files()
        elif isinstance(event, ScenarioFinished):
            if event.pair not in self._pairs:
                self._pairs.append(event.pair)
            key = (event.pair, event.scenario)
            occurrence = self._seen.get(key, 0)
            self._seen[key] = occurrence + 1
            write_case(scenario_case(event, catalogue=self.catalogue, occurrence=occurrence, run_id=self._run_id,
                                     failing=self.failing), self.out_dir)
        elif isinstance(event, RunFinished):
            self._run_id = self._run_id or event.run_id
            self._write_run_files()

    def _write_run_files(self) -> None:
        write_run_files(self.out_dir, run_id=self._run_id, pairs=self._pairs, command=self._command,
                        started_at=self._started_at)


def write_allure(events: Iterable[Event], out_dir: Path, *, catalogue: Catalogue,
                 failing: frozenset[Outcome] = frozenset()) -> Path:
    writer = AllureWriter(out_dir, catalogue=catalogue, failing=failing)
    for event in events:
        writer.handle(event)
    if not (writer.out_dir / "categories.json").exists():  # a stream without RunStarted/RunFinished
        writer.handle(RunFinished(run_id="", finished_at=0.0, duration_s=0.0, counts={}))
    return writer.out_dir


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
