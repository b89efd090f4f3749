"""The captured-history file format (`taskhub-conformance/history`, version 1).

One JSON document per workflow instance:

    {"format": "taskhub-conformance/history", "version": 1,
     "capturedAt": "2026-12-01T21:00:00Z", "source": "127.0.0.1:50001",
     "instance": {<WorkflowState as proto JSON>},
     "events": [<HistoryEvent as proto JSON>, ...]}

`instance` and `events` use the protobuf JSON mapping of the Dapr dialect (camelCase field
names, as `protojson` and `google.protobuf.json_format` write them). The JSON schema is
`history.schema.json` beside this module. Loading never raises anything but `HistoryFileError`,
whose message names the file, the place and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from taskhub_wire import pb
from taskhub_wire.kinds import OLD_EVENT_FIELDS

from conformance.errors import InputError

FORMAT = "taskhub-conformance/history"
VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("history.schema.json")



class HistoryFileError(InputError):
    """A history file that cannot be read; the message says where and what to do."""


@dataclass(frozen=True, kw_only=True)
class CapturedHistory:
    """One instance's history with the metadata GetInstance reported when it was captured."""

    instance_id: str
    name: str
    status: str  # OrchestrationStatus name without its prefix, e.g. "RUNNING"
    events: tuple[pb.HistoryEvent, ...]
    state: pb.WorkflowState
    source: str = ""
    captured_at: str = ""
    path: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.name}/{self.instance_id}"


def status_name(value: int) -> str:
    return pb.OrchestrationStatus.Name(value).removeprefix("ORCHESTRATION_STATUS_")


def to_document(h: CapturedHistory) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "capturedAt": h.captured_at,
        "source": h.source,
        "instance": json_format.MessageToDict(h.state),
        "events": [json_format.MessageToDict(e) for e in h.events],
    }


def make(*, state: pb.WorkflowState, events: Sequence[pb.HistoryEvent], source: str) -> CapturedHistory:
    return CapturedHistory(instance_id=state.instanceId, name=state.name, status=status_name(state.workflowStatus),
                           events=tuple(events), state=state, source=source,
                           captured_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def file_name(instance_id: str) -> str:
    """A file name for an instance id: ids may hold any character, file names may not."""
    safe = "".join(c if c.isalnum() or c in "-_." else f"%{ord(c):02X}" for c in instance_id)
    return f"{safe or '%empty'}.history.json"


def write(h: CapturedHistory, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / file_name(h.instance_id)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(to_document(h), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)  # never a half-written history
    return path


def _dapr_cli_rows(doc: Any) -> bool:
    """`dapr workflow history -o json` prints one summary row per event (play, type, attrs)."""
    return (isinstance(doc, list) and bool(doc) and isinstance(doc[0], dict)
            and {"type", "play"} <= set(doc[0]))


def _renamed(event: Any) -> Any:
    if isinstance(event, dict):
        return {OLD_EVENT_FIELDS[k].field if k in OLD_EVENT_FIELDS else k: v for k, v in event.items()}
    return event


def parse(doc: Any, *, where: str) -> CapturedHistory:
    if _dapr_cli_rows(doc):
        raise HistoryFileError(
            f"{where}: this is the output of `dapr workflow history -o json`, a summary for people: it "
            "truncates payloads (activity results, inputs) to 120 characters and drops the fields a replay "
            "needs, so it cannot be replayed. Export the instance with `conformance capture --from "
            "HOST:PORT --instance ID --out DIR` (docs/replay.md)")
    if not isinstance(doc, dict):
        raise HistoryFileError(f"{where}: expected a JSON object with \"format\": \"{FORMAT}\", "
                               f"got {type(doc).__name__}; capture it with `conformance capture`")
    if doc.get("format") != FORMAT:
        raise HistoryFileError(f"{where}: \"format\" is {doc.get('format')!r}, expected {FORMAT!r}; "
                               "capture the instance with `conformance capture`")
    if doc.get("version") != VERSION:
        raise HistoryFileError(f"{where}: format version {doc.get('version')!r} is not supported "
                               f"(this conformance reads version {VERSION}); capture again with this version")
    for key, kind in (("instance", dict), ("events", list)):
        if not isinstance(doc.get(key), kind):
            raise HistoryFileError(f"{where}: \"{key}\" must be a JSON {kind.__name__.replace('dict', 'object')}")
    try:
        state = json_format.ParseDict(doc["instance"], pb.WorkflowState(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise HistoryFileError(f"{where}: \"instance\" is not a WorkflowState: {exc}") from None
    events = []
    for i, raw in enumerate(doc["events"]):
        try:
            ev = json_format.ParseDict(_renamed(raw), pb.HistoryEvent(), ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise HistoryFileError(f"{where}: events[{i}] is not a HistoryEvent: {exc}") from None
        if ev.WhichOneof("eventType") is None:
            raise HistoryFileError(f"{where}: events[{i}] has no event type this schema knows "
                                   f"(keys {sorted(raw) if isinstance(raw, dict) else raw!r})")
        events.append(ev)
    if not events:
        raise HistoryFileError(f"{where}: \"events\" is empty: nothing to replay")
    start = next((e for e in events if e.HasField("executionStarted")), None)
    if start is None:
        raise HistoryFileError(f"{where}: the history has no ExecutionStarted event, so the workflow it ran is "
                               "unknown; capture the whole history")
    name = state.name or start.executionStarted.name
    iid = state.instanceId or start.executionStarted.workflowInstance.instanceId
    return CapturedHistory(instance_id=iid, name=name, status=status_name(state.workflowStatus),
                           events=tuple(events), state=state, source=str(doc.get("source", "")),
                           captured_at=str(doc.get("capturedAt", "")))


def load(path: Path) -> CapturedHistory:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryFileError(f"{path}: cannot read: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryFileError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    h = parse(doc, where=str(path))
    return CapturedHistory(**{**h.__dict__, "path": path})


def expand(paths: Sequence[Path]) -> list[Path]:
    """Files as given, folders as their *.json files (sorted); a missing path is an error."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob("*.json"))
            if not found:
                raise HistoryFileError(f"{p}: folder holds no *.json history files")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise HistoryFileError(f"{p}: no such file or folder")
    return out
