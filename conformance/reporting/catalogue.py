"""The requirement catalogue (`conformance/requirements.yaml`): what the matrix rows and allure labels are made of.

Shape of the file::

    requirements:
      - id: ACT-ALO-001                  # unique, no spaces
        title: Activities are delivered at least once
        text: full statement
        level: MUST                      # MUST | SHOULD | MAY
        area: activities
        applies_to: engine               # engine | worker | both
        source: "seed 000 §...; engine-rules R4.6"
        engines_differ: {...}            # optional free-form mapping
        ports: ["dapr/dapr tests/integration/suite/daprd/workflow/dedup/taskfailed.go"]   # optional: the
                                         # cases of a real engine's own test suite the requirement ports

`load_catalogue` checks the whole file and raises one `InputError` listing every problem
(`file:line: requirements[i] (ID): ...`), so a broken catalogue is fixed in one go.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from conformance.yamlload import SafeLoader
from conformance.errors import InputError, Problem

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "requirements.yaml"  # conformance/requirements.yaml
LEVELS = ("MUST", "SHOULD", "MAY", "INFO")  # strongest first; INFO: an observation, never a failure
APPLIES_TO = ("engine", "worker", "both")
_REQUIRED_KEYS = ("id", "title", "text", "level", "area", "applies_to", "source")
_OPTIONAL_KEYS = ("engines_differ", "ports")
# "<owner>/<repo> <path of the test file in it>": the test case of another project a requirement ports
PORT_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+ [A-Za-z0-9_./-]+$")
_KNOWN_KEYS = _REQUIRED_KEYS + _OPTIONAL_KEYS


def _bad_catalogue(source: str, problems: Sequence[Problem | str]) -> InputError:
    """The catalogue file is wrong: every problem found, one line each (most start with `file:line`)."""
    return InputError(problems, subject=f"the requirement catalogue {source}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    id: str
    title: str
    text: str
    level: str  # MUST | SHOULD | MAY
    area: str
    applies_to: str  # engine | worker | both
    source: str
    engines_differ: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False, hash=False)
    ports: tuple[str, ...] = field(default=(), compare=False)
    line: int = field(default=0, compare=False)  # 1-based line of the entry in its file (0: not from a file)


@dataclass(frozen=True, slots=True)
class Catalogue:
    requirements: tuple[Requirement, ...]
    path: Path | None = None
    _by_id: Mapping[str, Requirement] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", MappingProxyType({r.id: r for r in self.requirements}))

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements)

    def __len__(self) -> int:
        return len(self.requirements)

    def __contains__(self, requirement_id: object) -> bool:
        return requirement_id in self._by_id

    def __getitem__(self, requirement_id: str) -> Requirement:
        try:
            return self._by_id[requirement_id]
        except KeyError:
            raise KeyError(f"unknown requirement {requirement_id!r}; the catalogue has {len(self)} requirements") from None

    def get(self, requirement_id: str) -> Requirement | None:
        return self._by_id.get(requirement_id)

    def areas(self) -> dict[str, tuple[Requirement, ...]]:
        """Requirements grouped by area, areas and requirements in file order."""
        out: dict[str, list[Requirement]] = {}
        for r in self.requirements:
            out.setdefault(r.area, []).append(r)
        return {area: tuple(rs) for area, rs in out.items()}


def load_catalogue(path: str | Path = DEFAULT_PATH) -> Catalogue:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise _bad_catalogue(str(path), [f"cannot read the file: {e.strerror or e}"]) from None
    return parse_catalogue(text, source=str(path), path=path)


def parse_catalogue(text: str, *, source: str = "<catalogue>", path: Path | None = None) -> Catalogue:
    try:
        loader = SafeLoader(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        raise _bad_catalogue(source, [f"not valid YAML: {e}"]) from None

    if not isinstance(data, dict) or "requirements" not in data:
        raise _bad_catalogue(source, ["the top level must be a mapping with the key 'requirements' (a list of requirements)"])
    problems: list[Problem | str] = []
    extra_top = sorted(str(k) for k in data if k != "requirements")
    if extra_top:
        problems.append(f"unknown top-level key(s) {', '.join(map(repr, extra_top))}; the only key is 'requirements'")
    entries = data["requirements"]
    if not isinstance(entries, list):
        raise _bad_catalogue(source, problems + [f"'requirements' must be a list, not {type(entries).__name__}"])

    lines = _entry_lines(root)
    seen: dict[str, str] = {}  # id -> where it was first defined
    requirements: list[Requirement] = []
    for i, entry in enumerate(entries):
        line = lines[i] if i < len(lines) else 0
        where = f"{source}:{line}" if line else source

        def bad(what: str, *, at: str) -> None:
            problems.append(Problem(file=source, line=line, at=at, what=what))
        if not isinstance(entry, dict):
            bad(f"must be a mapping, not {type(entry).__name__}", at=f"requirements[{i}]")
            continue
        rid = entry.get("id")
        label = f"requirements[{i}] ({rid})" if isinstance(rid, str) and rid else f"requirements[{i}]"
        before = len(problems)
        missing = [k for k in _REQUIRED_KEYS if k not in entry]
        if missing:
            bad(f"missing key(s) {', '.join(missing)}", at=label)
        unknown = sorted(str(k) for k in entry if k not in _KNOWN_KEYS)
        if unknown:
            bad(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(_KNOWN_KEYS)}", at=label)
        for key in _REQUIRED_KEYS:
            if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
                bad(f"{key!r} must be a non-empty string, got {entry[key]!r}", at=label)
        if isinstance(rid, str) and rid.strip():
            if any(c.isspace() for c in rid):
                bad("id must not contain spaces", at=label)
            if rid in seen:
                bad(f"duplicate id {rid!r} (first defined at {seen[rid]})", at=label)
            else:
                seen[rid] = where
        level = entry.get("level")
        if isinstance(level, str) and level.strip() and level not in LEVELS:
            bad(f"bad level {level!r}; one of {', '.join(LEVELS)}", at=label)
        applies = entry.get("applies_to")
        if isinstance(applies, str) and applies.strip() and applies not in APPLIES_TO:
            bad(f"bad applies_to {applies!r}; one of {', '.join(APPLIES_TO)}", at=label)
        differ = entry.get("engines_differ")
        if differ is not None and not isinstance(differ, dict):
            bad(f"'engines_differ' must be a mapping, got {type(differ).__name__}", at=label)
        ports = entry.get("ports", [])
        if not isinstance(ports, list) or not ports or not all(isinstance(x, str) and PORT_RE.match(x) for x in ports):
            if "ports" in entry:
                bad(f"'ports' must be a non-empty list of \"<owner>/<repo> <test file path>\" strings, got {ports!r}",
                    at=label)
            ports = []
        if len(problems) == before:
            requirements.append(
                Requirement(
                    id=rid,
                    title=entry["title"].strip(),
                    text=entry["text"].strip(),
                    level=level,
                    area=entry["area"].strip(),
                    applies_to=applies,
                    source=entry["source"].strip(),
                    engines_differ=MappingProxyType(dict(differ or {})),
                    ports=tuple(ports),
                    line=line,
                )
            )
    if problems:
        raise _bad_catalogue(source, problems)
    return Catalogue(tuple(requirements), path)


def strongest_level(levels: list[str] | tuple[str, ...]) -> str | None:
    """MUST beats SHOULD beats MAY; None when no level is given."""
    known = [lv for lv in levels if lv in LEVELS]
    return min(known, key=LEVELS.index) if known else None


def _entry_lines(root: yaml.Node | None) -> list[int]:
    """1-based start line of each item of the top-level `requirements` sequence."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "requirements" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []
