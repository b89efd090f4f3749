"""Shape of the requirement catalogue, conformance/requirements.yaml.

A broken catalogue must fail CI with a message that names the entry (id and line) and says what is
wrong, all problems at once. The checker is tested on deliberately broken catalogues below.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

CATALOGUE = Path(__file__).resolve().parents[2] / "conformance" / "requirements.yaml"

LEVELS = ("MUST", "SHOULD", "MAY", "INFO")
APPLIES_TO = ("engine", "worker", "both")
# area -> the AREA part of its ids
AREA_PREFIX = {
    "replay": "RPL",
    "history": "HIST",
    "activities": "ACT",
    "tokens": "TOK",
    "patching": "PATCH",
    "versioning": "VER",
    "stall": "STALL",
    "timers": "TMR",
    "events": "EVT",
    "children": "CHILD",
    "continue-as-new": "CAN",
    "lifecycle": "LIFE",
    "purge": "PURGE",
    "listing": "LIST",
    "rerun": "RERUN",
    "management-errors": "MGMT",
    "connection": "CONN",
    "security": "SEC",
    "payload": "PAY",
    "routing": "ROUTE",
    "propagation": "PROP",
}
REQUIRED_KEYS = ("id", "title", "text", "level", "area", "applies_to", "source")
OPTIONAL_KEYS = ("engines_differ", "ports")
# a ported test case: "<owner>/<repo> <path of the test file>"
PORT_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+ [A-Za-z0-9_./-]+\.[a-z]+$")
DIFFER_KEYS = ("spec", "durabletask-go", "daprd", "reference")
ID_RE = re.compile(r"^(?P<area>[A-Z]+)-(?P<topic>[A-Z0-9]+)-(?P<num>[0-9]{3})$")
TITLE_MAX = 70


class _Mapping(dict[str, Any]):
    """A YAML mapping that remembers the line it starts on (1-based)."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    """SafeLoader that records line numbers and refuses duplicate keys (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> _Mapping:  # type: ignore[override]
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark)
            seen[key] = line
        mapping = _Mapping(super().construct_mapping(node, deep=deep))
        mapping.line = node.start_mark.line + 1
        return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _Loader.construct_mapping)


def load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def problems(doc: Any, *, name: str = "requirements.yaml") -> list[str]:
    """Every shape problem of a loaded catalogue, each naming its entry; empty when well formed."""
    if not isinstance(doc, dict) or set(doc) != {"requirements"}:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        return [f"{name}: the top level must be a mapping with the single key 'requirements', got {keys}"]
    entries = doc["requirements"]
    if not isinstance(entries, list) or not entries:
        return [f"{name}: 'requirements' must be a non-empty list of entries"]

    out: list[str] = []
    first_line: dict[str, int] = {}
    areas_used: Counter[str] = Counter()
    for index, entry in enumerate(entries):
        line = getattr(entry, "line", 0)
        rid = entry.get("id") if isinstance(entry, dict) else None
        where = f"{name}:{line} entry #{index + 1}" + (f" ({rid})" if isinstance(rid, str) and rid else "")

        def bad(message: str, where: str = where) -> None:
            out.append(f"{where}: {message}")

        if not isinstance(entry, dict):
            bad(f"must be a mapping, got {type(entry).__name__}")
            continue
        missing = [k for k in REQUIRED_KEYS if k not in entry]
        if missing:
            bad(f"missing key(s) {', '.join(missing)}")
        unknown = sorted(set(entry) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
        if unknown:
            bad(f"unknown key(s) {', '.join(map(str, unknown))}; allowed: {', '.join(REQUIRED_KEYS + OPTIONAL_KEYS)}")

        for key in ("id", "title", "text", "source"):
            if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
                bad(f"'{key}' must be a non-empty string, got {entry[key]!r}")

        match = None
        if isinstance(rid, str) and rid.strip():
            match = ID_RE.match(rid)
            if match is None:
                bad(f"id {rid!r} is not AREA-TOPIC-NNN (upper case, e.g. ACT-ALO-001)")
            if rid in first_line:
                bad(f"duplicate id {rid!r} (first at line {first_line[rid]})")
            else:
                first_line[rid] = line

        title = entry.get("title")
        if isinstance(title, str):
            if len(title) > TITLE_MAX:
                bad(f"title is {len(title)} characters, at most {TITLE_MAX} allowed: {title!r}")
            if "\n" in title.strip():
                bad("title must be a single line")

        if "level" in entry and entry["level"] not in LEVELS:
            bad(f"level {entry['level']!r} is not one of {', '.join(LEVELS)}")
        if "applies_to" in entry and entry["applies_to"] not in APPLIES_TO:
            bad(f"applies_to {entry['applies_to']!r} is not one of {', '.join(APPLIES_TO)}")
        area = entry.get("area")
        if "area" in entry:
            if area not in AREA_PREFIX:
                bad(f"area {area!r} is not one of {', '.join(AREA_PREFIX)}")
            else:
                areas_used[area] += 1
                if match is not None and match["area"] != AREA_PREFIX[area]:
                    bad(f"id {rid!r} of area {area!r} must start with {AREA_PREFIX[area]}-")

        if "engines_differ" in entry:
            differ = entry["engines_differ"]
            if not isinstance(differ, dict):
                bad(f"engines_differ must be a mapping of {', '.join(DIFFER_KEYS)}, got {type(differ).__name__}")
            else:
                extra = sorted(set(differ) - set(DIFFER_KEYS))
                if extra:
                    bad(f"engines_differ has unknown key(s) {', '.join(map(str, extra))}; "
                        f"allowed: {', '.join(DIFFER_KEYS)}")
                if len(differ) < 2:
                    bad("engines_differ must state at least two behaviours (spec, durabletask-go, daprd, reference)")
                for key, value in differ.items():
                    if not isinstance(value, str) or not value.strip():
                        bad(f"engines_differ.{key} must be a non-empty string, got {value!r}")

        if "ports" in entry:
            ports = entry["ports"]
            if not isinstance(ports, list) or not ports:
                bad(f"ports must be a non-empty list of '<owner>/<repo> <test file>' strings, got {ports!r}")
            else:
                for port in ports:
                    if not isinstance(port, str) or not PORT_RE.match(port):
                        bad(f"ports entry {port!r} is not '<owner>/<repo> <test file path>'")

    unused = [a for a in AREA_PREFIX if not areas_used[a]]
    if unused:
        out.append(f"{name}: no requirement for area(s) {', '.join(unused)}; every area needs at least one")
    return out


# --------------------------------------------------------------------------- the real catalogue


def test_catalogue_loads() -> None:
    assert CATALOGUE.is_file(), f"missing {CATALOGUE}"
    try:
        load(CATALOGUE.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        pytest.fail(f"{CATALOGUE.name} is not valid YAML: {exc}")


def test_catalogue_is_well_formed() -> None:
    found = problems(load(CATALOGUE.read_text(encoding="utf-8")), name=CATALOGUE.name)
    assert not found, f"{len(found)} problem(s) in {CATALOGUE}:\n  " + "\n  ".join(found)


# --------------------------------------------------------------------------- the checker itself

GOOD = """\
requirements:
  - id: ACT-ALO-001
    title: Activities are delivered at least once
    text: An activity whose stream breaks MUST be dispatched again.
    level: MUST
    area: activities
    applies_to: engine
    source: "seed 000 §活动生命周期; engine-rules R4.6"
    engines_differ:
      durabletask-go: redelivers at once
      daprd: redelivers through a reminder
    ports: [dapr/dapr tests/integration/suite/daprd/workflow/activity.go]
"""


def _one_area_only(found: list[str]) -> list[str]:
    """The small fixtures cover one area; ignore the 'every area' problem."""
    return [p for p in found if "no requirement for area(s)" not in p]


def test_checker_accepts_a_good_entry() -> None:
    assert _one_area_only(problems(load(GOOD))) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("id: ACT-ALO-001", "id: act-alo-1"), "is not AREA-TOPIC-NNN"),
        (("id: ACT-ALO-001", "id: TMR-ALO-001"), "must start with ACT-"),
        (("level: MUST", "level: must"), "level 'must' is not one of"),
        (("area: activities", "area: activity"), "area 'activity' is not one of"),
        (("applies_to: engine", "applies_to: sdk"), "applies_to 'sdk' is not one of"),
        (("    text: An activity whose stream breaks MUST be dispatched again.\n", ""), "missing key(s) text"),
        (('source: "seed 000 §活动生命周期; engine-rules R4.6"', 'source: ""'), "'source' must be a non-empty string"),
        (("title: Activities are delivered at least once", "title: " + "x" * 71), "title is 71 characters"),
        (("    level: MUST\n", "    level: MUST\n    levle: MUST\n"), "unknown key(s) levle"),
        (("      daprd: redelivers through a reminder\n", ""), "at least two behaviours"),
        (("      daprd:", "      dapr:"), "engines_differ has unknown key(s) dapr"),
        (("ports: [dapr/dapr tests", "ports: [dapr tests"), "is not '<owner>/<repo> <test file path>'"),
        (("ports: [dapr/dapr tests/integration/suite/daprd/workflow/activity.go]", "ports: []"),
         "ports must be a non-empty list"),
    ],
)
def test_checker_names_the_broken_entry(edit: tuple[str, str], expected: str) -> None:
    old, new = edit
    assert old in GOOD
    found = _one_area_only(problems(load(GOOD.replace(old, new, 1))))
    assert any(expected in p for p in found), found
    assert all("requirements.yaml:2 entry #1" in p for p in found), found


def test_checker_reports_duplicate_ids_with_both_lines() -> None:
    doc = GOOD + GOOD.removeprefix("requirements:\n")
    found = _one_area_only(problems(load(doc)))
    assert found == ["requirements.yaml:13 entry #2 (ACT-ALO-001): duplicate id 'ACT-ALO-001' (first at line 2)"]


def test_loader_refuses_duplicate_keys() -> None:
    doc = GOOD.replace("    level: MUST\n", "    level: MUST\n    level: MAY\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'level'"):
        load(doc)


def test_checker_requires_every_area() -> None:
    found = problems(load(GOOD))
    assert len(found) == 1 and "no requirement for area(s) replay, history" in found[0]


@pytest.mark.parametrize("doc", ["", "- a\n", "requirements: []\n", "requirements: {}\n", "reqs: [1]\n"])
def test_checker_reports_a_broken_top_level(doc: str) -> None:
    found = problems(load(doc))
    assert len(found) == 1 and found[0].startswith("requirements.yaml: "), found
