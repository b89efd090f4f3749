"""The repository stands on its own: no machine paths, and every rule or section it cites exists.

A reader must be able to follow each citation inside the repository: an R-number to its rule in
docs/engine-rules.md, `sdk-behaviour §n` / `patching-and-stall §n` / `protocol-facts §n` /
`DESIGN §n` to a numbered section of its page, `seed 000 §<heading>` to a heading of docs/spec.md.
Which page each form names is stated in the header of conformance/requirements.yaml.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Directories that are never part of the repository's content (installs, caches, outputs).
UNTRACKED_DIRS = frozenset({".git", ".venv", ".sdk", ".tools", "node_modules", "__pycache__", "target",
                            ".pytest_cache", ".hypothesis", "reports"})

# Written in pieces so this file does not match itself.
MACHINE_PATH = re.compile("|".join([
    r"(?<![\w.~-])/" + "work/",
    r"(?<![\w.~-])/" + "root/",
    r"(?<![\w.~-])/" + r"home/[a-z_][\w.-]*",
    r"\.\./" + r"shared\b",
    r"\bshared/" + r"(?:reference|seeds)\b",
]))

RULE = re.compile(r"\bR(\d+)\.(\d+)\b")
# A page cited by name -> its file under docs/.
PAGES = {
    "engine-rules": "engine-rules.md",
    "sdk-behaviour": "sdk-wire-behaviour.md",
    "sdk-wire-behaviour": "sdk-wire-behaviour.md",
    "patching-and-stall": "patching-and-stall.md",
    "protocol-facts": "protocol-facts.md",
    "DESIGN": "design.md",
    "design": "design.md",
}
PAGE_NAME = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, PAGES), key=len, reverse=True))
                       + r")(?:\.md)?(?![\w-])")
SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)(?:\s*[-–]\s*(\d+(?:\.\d+)*))?")
SEED = re.compile(r"\bseed (\d{3})\b")
SEEDS = frozenset({"000", "002", "004"})
SEED_HEADING = re.compile(r"§\s*([^,;\"'`()\n]+)")


def repository_files() -> list[Path]:
    """The tracked files (git), or every file outside the untracked directories without git."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        paths = [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for p in ROOT.rglob("*") if not UNTRACKED_DIRS & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in paths if p.is_file())


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class Hit:
    where: str  # file:line
    cited: str

    def __str__(self) -> str:
        return f"{self.where}: {self.cited}"


def lines_of_repository() -> list[tuple[str, str]]:
    out = []
    for path in repository_files():
        text = text_of(path)
        if text is None:
            continue
        name = path.relative_to(ROOT).as_posix()
        if name == SELF:
            continue  # its own examples are wrong on purpose
        out.extend((f"{name}:{n}", line) for n, line in enumerate(text.splitlines(), 1))
    return out


@pytest.fixture(scope="module")
def repo_lines() -> list[tuple[str, str]]:
    return lines_of_repository()


# ------------------------------------------------------------------------------ what a page holds

def rules_defined(text: str) -> set[str]:
    """R-numbers that head a rule: a markdown heading starting with the number."""
    return {f"R{m[1]}.{m[2]}" for m in re.finditer(r"^#{2,6}\s+R(\d+)\.(\d+)\b", text, re.M)}


def sections_defined(text: str) -> set[str]:
    """Section numbers of the headings `## 2. Title` / `### 2.1 Title`."""
    return {m[1] for m in re.finditer(r"^#{2,6}\s+§?(\d+(?:\.\d+)*)\.?\s", text, re.M)}


def headings(text: str) -> list[str]:
    return [m[1].strip() for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)]


# ------------------------------------------------------------------------------ what is cited

def rule_citations(lines: list[tuple[str, str]]) -> list[Hit]:
    return [Hit(where, f"R{m[1]}.{m[2]}") for where, line in lines for m in RULE.finditer(line)]


def section_citations(lines: list[tuple[str, str]]) -> list[tuple[Hit, str]]:
    """(hit, page file) for every `§n` that follows a page's name, up to the next page, `;` or line end."""
    out = []
    for where, line in lines:
        names = list(PAGE_NAME.finditer(line))
        for i, m in enumerate(names):
            end = names[i + 1].start() if i + 1 < len(names) else len(line)
            tail = line[m.end():end].split(";", 1)[0]
            for s in SECTION.finditer(tail):
                for number in filter(None, s.groups()):
                    out.append((Hit(where, f"{m[1]} §{number}"), PAGES[m[1]]))
    return out


def seed_citations(lines: list[tuple[str, str]]) -> list[Hit]:
    """`seed 0NN` numbers, and the headings of `seed 000 §<heading>, §<heading> (...)` citations."""
    out = []
    for where, line in lines:
        seeds = list(SEED.finditer(line))
        for i, m in enumerate(seeds):
            out.append(Hit(where, f"seed {m[1]}"))
            end = seeds[i + 1].start() if i + 1 < len(seeds) else len(line)
            tail = re.sub(r"\([^)]*\)", "", line[m.end():end].split(";", 1)[0])
            for s in SEED_HEADING.finditer(tail):
                heading = s[1].strip()
                if heading.strip(". …") and not heading.startswith("<") and not PAGE_NAME.search(heading):
                    out.append(Hit(where, f"seed {m[1]} §{heading}"))
    return out


# ------------------------------------------------------------------------------ the checks

def test_no_machine_paths(repo_lines: list[tuple[str, str]]) -> None:
    hits = [f"{where}: {m[0]!r}" for where, line in repo_lines for m in MACHINE_PATH.finditer(line)]
    assert not hits, ("paths outside the repository (cite the docs/ page instead; see the README's "
                      "Documentation section):\n" + "\n".join(hits))


def test_every_rule_number_has_its_rule(repo_lines: list[tuple[str, str]]) -> None:
    defined = rules_defined((DOCS / "engine-rules.md").read_text(encoding="utf-8"))
    missing = [str(h) for h in rule_citations(repo_lines) if h.cited not in defined]
    assert not missing, "R-numbers with no rule heading in docs/engine-rules.md:\n" + "\n".join(missing)


def test_every_cited_section_exists(repo_lines: list[tuple[str, str]]) -> None:
    sections = {f: sections_defined((DOCS / f).read_text(encoding="utf-8")) for f in set(PAGES.values())}
    missing = [f"{hit} (no section {hit.cited.split('§')[1]} in docs/{page})"
               for hit, page in section_citations(repo_lines) if hit.cited.split("§")[1] not in sections[page]]
    assert not missing, "sections cited but missing:\n" + "\n".join(missing)


def test_every_spec_citation_has_its_heading(repo_lines: list[tuple[str, str]]) -> None:
    spec = [h.lower() for h in headings((DOCS / "spec.md").read_text(encoding="utf-8"))]
    missing = []
    for hit in seed_citations(repo_lines):
        number, _, heading = hit.cited.removeprefix("seed ").partition(" §")
        if number not in SEEDS:
            missing.append(f"{hit} (the spec is seeds {', '.join(sorted(SEEDS))})")
        elif heading and not any(heading.lower() in h for h in spec):
            missing.append(f"{hit} (no heading of docs/spec.md contains it)")
    assert not missing, "spec citations that docs/spec.md cannot resolve:\n" + "\n".join(missing)


def slug(heading: str) -> str:
    """The anchor GitHub gives a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_resolve() -> None:
    """Markdown links between the repository's pages reach an existing file and heading."""
    broken = []
    for path in repository_files():
        if path.suffix != ".md" or (text := text_of(path)) is None:
            continue
        for m in LINK.finditer(text):
            target, _, anchor = m[1].partition("#")
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            dest = (path.parent / target).resolve() if target else path
            name = f"{path.relative_to(ROOT).as_posix()}: ({m[1]})"
            if not dest.exists():
                broken.append(f"{name} no such file")
            elif anchor and dest.suffix == ".md" and anchor not in {slug(h) for h in headings(dest.read_text())}:
                broken.append(f"{name} no such heading")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_scan_sees_the_citations(repo_lines: list[tuple[str, str]]) -> None:
    """Guards the scanners themselves: the catalogue's citations are found."""
    catalogue = [(w, l) for w, l in repo_lines if w.startswith("conformance/requirements.yaml:")]
    assert len(rule_citations(catalogue)) > 100
    assert len(section_citations(catalogue)) > 20
    assert len([h for h in seed_citations(catalogue) if "§" in h.cited]) > 50


# ------------------------------------------------------------------------------ the scanners

@pytest.mark.parametrize(("line", "expected"), [
    ('source: "engine-rules R7.3, §9; patching-and-stall §5, §8"',
     [("engine-rules §9", "engine-rules.md"), ("patching-and-stall §5", "patching-and-stall.md"),
      ("patching-and-stall §8", "patching-and-stall.md")]),
    ("(sdk-wire-behaviour.md §3.2, patching-and-stall.md §2-3)",
     [("sdk-wire-behaviour §3.2", "sdk-wire-behaviour.md"), ("patching-and-stall §2", "patching-and-stall.md"),
      ("patching-and-stall §3", "patching-and-stall.md")]),
    ("see docs/design.md §2 and DESIGN §6", [("design §2", "design.md"), ("DESIGN §6", "design.md")]),
    ("no page here §4", []),
])
def test_section_citations_are_parsed(line: str, expected: list[tuple[str, str]]) -> None:
    assert [(h.cited, page) for h, page in section_citations([("f:1", line)])] == expected


def test_seed_citations_are_parsed() -> None:
    line = 'source: "seed 000 §编排生命周期 (补丁记录), §版本控制 (边车); seed 004 (genau einmal); seed 001 §x"'
    assert [h.cited for h in seed_citations([("f:1", line)])] == [
        "seed 000", "seed 000 §编排生命周期", "seed 000 §版本控制", "seed 004", "seed 001", "seed 001 §x"]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("2. The patching flow of one turn", "2-the-patching-flow-of-one-turn"),
    ("3.2 The history events each SDK handles", "32-the-history-events-each-sdk-handles"),
    ("执行 API — Execution API", "执行-api--execution-api"),
])
def test_anchors_are_made_as_github_makes_them(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_page_structure_is_read() -> None:
    text = "# T\n\n## 2. History\n\n### R2.5 Correlation ids [BOTH]\n\n### 2.1 dx\n\n## Words\n"
    assert rules_defined(text) == {"R2.5"}
    assert sections_defined(text) == {"2", "2.1"}
    assert headings(text) == ["T", "2. History", "R2.5 Correlation ids [BOTH]", "2.1 dx", "Words"]


@pytest.mark.parametrize(("text", "bad"), [
    ("see " + "/wo" + "rk/shared/x.md", True),
    ("cd /ro" + "ot/x", True),
    ("/ho" + "me/alice/project", True),
    ("../sha" + "red/reference/engine-rules.md", True),
    ("docs/engine-rules.md and https://example.com/network/x", False),
    ("a /tmp/x path and .venv/bin/python", False),
])
def test_machine_paths_are_recognised(text: str, bad: bool) -> None:
    assert bool(MACHINE_PATH.search(text)) is bad
