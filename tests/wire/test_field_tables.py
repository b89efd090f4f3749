"""Our Dapr-dialect descriptors against the independent wire facts (tests/wire/facts/).

- field-tables.json["dapr_go_HEAD"]: every message, field number, name and type;
- message-tables.md (Dapr column): proto3 ``optional``, oneof membership, deprecation, reserved numbers;
- docs/protocol-facts.md §3.8 / §3.1: enum values.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from taskhub_wire import pb

from conformance.drift.dump_python import SCALARS

DIALECT = "dapr_go_HEAD"


def _type_name(f: FieldDescriptor, *, element: bool = False) -> str:
    """The reference spelling of a field's type: scalars, short names, google.protobuf.X."""
    if f.message_type is not None and f.message_type.GetOptions().map_entry and not element:
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return f"map<{_type_name(key, element=True)},{_type_name(value, element=True)}>"
    if f.message_type is not None:
        base = _full_or_short(f.message_type.full_name, f.message_type.name)
    elif f.enum_type is not None:
        base = _full_or_short(f.enum_type.full_name, f.enum_type.name)
    else:
        base = SCALARS[f.type]
    return f"repeated {base}" if f.is_repeated and not element else base


def _full_or_short(full_name: str, name: str) -> str:
    return full_name if full_name.startswith("google.protobuf.") else name


def _messages() -> dict[str, Descriptor]:
    return dict(pb.DESCRIPTOR.message_types_by_name)


def _proto(message: Descriptor) -> descriptor_pb2.DescriptorProto:
    # Only the DescriptorProto says which oneofs are synthetic (proto3 `optional`).
    proto = descriptor_pb2.DescriptorProto()
    message.CopyToProto(proto)
    return proto


@pytest.fixture(scope="module")
def field_tables(field_tables_path: Path) -> dict[str, dict[str, list[str]]]:
    tables = json.loads(field_tables_path.read_text())
    assert DIALECT in tables, f"{field_tables_path} has no {DIALECT!r} key; keys: {sorted(tables)}"
    return tables[DIALECT]


def test_same_message_set(field_tables: dict[str, dict[str, list[str]]]) -> None:
    ours = set(_messages())
    theirs = set(field_tables)
    assert len(theirs) == 79
    assert ours == theirs, f"missing: {sorted(theirs - ours)}; extra: {sorted(ours - theirs)}"


def test_fields_match_reference(field_tables: dict[str, dict[str, list[str]]]) -> None:
    problems = []
    messages = _messages()
    for name, fields in sorted(field_tables.items()):
        message = messages.get(name)
        if message is None:
            problems.append(f"{name}: message missing")
            continue
        expected = {int(number): (f_name, f_type) for number, (f_name, f_type) in fields.items()}
        actual = {f.number: (f.name, _type_name(f)) for f in message.fields}
        for number in sorted(expected.keys() | actual.keys()):
            if expected.get(number) != actual.get(number):
                problems.append(f"{name}.{number}: reference {expected.get(number)}, ours {actual.get(number)}")
    assert not problems, "\n".join(problems)


# Oneof memberships, read from message-tables.md by hand (and cross-checked by the parser below).
ONEOFS = {
    ("HistoryEvent", "eventType"): {
        "executionStarted",
        "executionCompleted",
        "executionTerminated",
        "taskScheduled",
        "taskCompleted",
        "taskFailed",
        "childWorkflowInstanceCreated",
        "childWorkflowInstanceCompleted",
        "childWorkflowInstanceFailed",
        "timerCreated",
        "timerFired",
        "workflowStarted",
        "workflowCompleted",
        "eventSent",
        "eventRaised",
        "continueAsNew",
        "executionSuspended",
        "executionResumed",
        "executionStalled",
        "detachedWorkflowInstanceCreated",
    },
    ("WorkItem", "request"): {"workflowRequest", "activityRequest"},
    ("WorkflowAction", "workflowActionType"): {
        "scheduleTask",
        "createChildWorkflow",
        "createTimer",
        "sendEvent",
        "completeWorkflow",
        "terminateWorkflow",
        "workflowVersionNotAvailable",
        "createDetachedWorkflow",
    },
    ("CreateTimerAction", "origin"): {"createTimer", "externalEvent", "activityRetry", "childWorkflowRetry"},
    ("TimerCreatedEvent", "origin"): {"createTimer", "externalEvent", "activityRetry", "childWorkflowRetry"},
    ("PurgeInstancesRequest", "request"): {"instanceId", "purgeInstanceFilter"},
}


@pytest.mark.parametrize(("message", "oneof"), sorted(ONEOFS))
def test_oneof_membership(message: str, oneof: str) -> None:
    descriptor = _messages()[message]
    real = {o.name for o in descriptor.oneofs if not o.name.startswith("_")}
    assert real == {oneof}, f"{message} real oneofs: {real}"
    assert {f.name for f in descriptor.oneofs_by_name[oneof].fields} == ONEOFS[message, oneof]


def test_router_fields_outside_oneofs() -> None:
    # Dapr's router 30 / 9 sit outside the oneof; the Microsoft dialect puts other members there.
    for message in ("HistoryEvent", "WorkflowAction"):
        router = _messages()[message].fields_by_name["router"]
        assert router.containing_oneof is not None and router.containing_oneof.name == "_router"


# ---------------------------------------------------------------------------------------------
# message-tables.md, Dapr column
# ---------------------------------------------------------------------------------------------


@dataclass
class TableField:
    name: str
    type: str
    optional: bool
    oneof: str | None
    deprecated: bool


@dataclass
class TableMessage:
    fields: dict[int, TableField] = field(default_factory=dict)
    reserved: set[int] = field(default_factory=set)


_HEADING = re.compile(r"^#### (Dapr|MS) `(\w+)`(?: / MS `\w+`)?\s*$")
_ROW = re.compile(r"^\| (\d+) \| ([^|]*) \|")
_CELL = re.compile(r"^(?:\[oneof (\w+)\] )?(optional )?(\w+): (.+?)( \(deprecated\))?$")
_RESERVED = re.compile(r"^(?:Dapr )?reserved numbers: ([\d, ]+)$")


def parse_dapr_tables(text: str) -> dict[str, TableMessage]:
    """Dapr messages of message-tables.md: the first data column of each Dapr table."""
    tables: dict[str, TableMessage] = {}
    current: TableMessage | None = None
    for line in text.splitlines():
        if line.startswith("#### "):
            heading = _HEADING.match(line)
            current = None
            if heading and heading.group(1) == "Dapr":
                current = tables.setdefault(heading.group(2), TableMessage())
            continue
        if current is None:
            continue
        if row := _ROW.match(line):
            cell = row.group(2).strip()
            if cell in ("—", "-", ""):
                continue
            parsed = _CELL.match(cell)
            assert parsed, f"unparsed message-tables.md cell: {cell!r}"
            oneof, optional, name, type_, deprecated = parsed.groups()
            current.fields[int(row.group(1))] = TableField(name, type_, bool(optional), oneof, bool(deprecated))
        elif reserved := _RESERVED.match(line.strip()):
            current.reserved = {int(n) for n in reserved.group(1).split(",")}
    return tables


@pytest.fixture(scope="module")
def dapr_tables(message_tables_path: Path) -> dict[str, TableMessage]:
    tables = parse_dapr_tables(message_tables_path.read_text())
    assert len(tables) >= 60, f"parsed only {len(tables)} Dapr tables from {message_tables_path}"
    return tables


def test_presence_oneofs_and_reserved_match_message_tables(dapr_tables: dict[str, TableMessage]) -> None:
    problems = []
    messages = _messages()
    for name, table in sorted(dapr_tables.items()):
        if name not in messages:
            problems.append(f"{name}: message missing")
            continue
        proto = _proto(messages[name])
        ours = {}
        for f in proto.field:
            oneof = (
                proto.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") and not f.proto3_optional else None
            )
            ours[f.number] = (f.name, f.proto3_optional, oneof, f.options.deprecated)
        expected = {n: (t.name, t.optional, t.oneof, t.deprecated) for n, t in table.fields.items()}
        for number in sorted(expected.keys() | ours.keys()):
            if expected.get(number) != ours.get(number):
                problems.append(f"{name}.{number}: message-tables {expected.get(number)}, ours {ours.get(number)}")
        ours_reserved = {n for r in proto.reserved_range for n in range(r.start, r.end)}
        if ours_reserved != table.reserved:
            problems.append(f"{name}: reserved message-tables {sorted(table.reserved)}, ours {sorted(ours_reserved)}")
    assert not problems, "\n".join(problems)


def test_message_tables_types_agree_with_field_tables(
    dapr_tables: dict[str, TableMessage], field_tables: dict[str, dict[str, list[str]]]
) -> None:
    # The two facts files must not disagree with each other either.
    for name, table in dapr_tables.items():
        for number, f in table.fields.items():
            assert field_tables[name][str(number)] == [f.name, f.type], f"{name}.{number}"


# ---------------------------------------------------------------------------------------------
# Enums (docs/protocol-facts.md §3.1 and §3.8; value names as upstream spells them)
# ---------------------------------------------------------------------------------------------

ENUMS = {
    "OrchestrationStatus": [
        ("ORCHESTRATION_STATUS_RUNNING", 0),
        ("ORCHESTRATION_STATUS_COMPLETED", 1),
        ("ORCHESTRATION_STATUS_CONTINUED_AS_NEW", 2),
        ("ORCHESTRATION_STATUS_FAILED", 3),
        ("ORCHESTRATION_STATUS_CANCELED", 4),
        ("ORCHESTRATION_STATUS_TERMINATED", 5),
        ("ORCHESTRATION_STATUS_PENDING", 6),
        ("ORCHESTRATION_STATUS_SUSPENDED", 7),
        ("ORCHESTRATION_STATUS_STALLED", 8),
    ],
    "StalledReason": [("PATCH_MISMATCH", 0), ("VERSION_NOT_AVAILABLE", 1), ("PAYLOAD_SIZE_EXCEEDED", 2)],
    "HistoryPropagationScope": [
        ("HISTORY_PROPAGATION_SCOPE_NONE", 0),
        ("HISTORY_PROPAGATION_SCOPE_OWN_HISTORY", 1),
        ("HISTORY_PROPAGATION_SCOPE_LINEAGE", 2),
    ],
    "WorkerCapability": [("WORKER_CAPABILITY_UNSPECIFIED", 0), ("WORKER_CAPABILITY_STATEFUL_HISTORY", 2)],
    "TerminalStatus": [
        ("TERMINAL_STATUS_UNSPECIFIED", 0),
        ("TERMINAL_STATUS_COMPLETED", 1),
        ("TERMINAL_STATUS_FAILED", 2),
    ],
    "ActivityTerminalStatus": [
        ("ACTIVITY_TERMINAL_STATUS_UNSPECIFIED", 0),
        ("ACTIVITY_TERMINAL_STATUS_COMPLETED", 1),
        ("ACTIVITY_TERMINAL_STATUS_FAILED", 2),
    ],
}


def test_enums() -> None:
    assert set(pb.DESCRIPTOR.enum_types_by_name) == set(ENUMS)
    for name, values in ENUMS.items():
        assert [(v.name, v.number) for v in pb.DESCRIPTOR.enum_types_by_name[name].values] == values, name


def test_worker_capability_reserves_history_streaming() -> None:
    proto = descriptor_pb2.EnumDescriptorProto()
    pb.WorkerCapability.DESCRIPTOR.CopyToProto(proto)
    assert [(r.start, r.end) for r in proto.reserved_range] == [(1, 1)]


def test_every_referenced_enum_is_declared(field_tables: dict[str, dict[str, list[str]]]) -> None:
    known = set(field_tables) | set(ENUMS)
    for message, fields in field_tables.items():
        for number, (_, type_) in fields.items():
            base = type_.removeprefix("repeated ")
            if base[:1].isupper():
                assert base in known, f"{message}.{number} references undeclared {base}"
