"""The mutants of an executor: cosmic-ray's operators over the scoped lines, one mutant per occurrence.

cosmic-ray names a mutation by (file, operator, occurrence): the occurrence-th place in the file
where the operator applies. That triple, with the line, is a mutant's id here, so a campaign
and the reviewed-equivalents file name the same mutant as long as the file is the same release.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.mutation.sdks import Scope


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutant:
    relpath: str  # the file inside site-packages
    operator: str  # cosmic-ray's operator name, e.g. core/ReplaceComparisonOperator_Eq_NotEq
    occurrence: int
    line: int  # where the mutation starts (1-based)
    end_line: int

    @property
    def id(self) -> str:
        return f"{self.relpath}:{self.line}:{self.operator}#{self.occurrence}"


def _operators() -> list[tuple[str, object]]:
    import cosmic_ray.plugins

    out = []
    for name in cosmic_ray.plugins.operator_names():
        cls = cosmic_ray.plugins.get_operator(name)
        if not cls.arguments():  # operators that need arguments are not configured by a campaign
            out.append((name, cls()))
    return out


def enumerate_mutants(*, site: Path, scopes: Sequence[Scope]) -> list[Mutant]:
    """Every mutant cosmic-ray makes in the scoped lines, in file, operator, occurrence order."""
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    out: list[Mutant] = []
    operators = _operators()
    for scope in scopes:
        tree = get_ast_from_path(site / scope.relpath)
        nodes = list(ast_nodes(tree))
        for name, operator in operators:
            positions = ((start, end) for node in nodes for start, end in operator.mutation_positions(node))
            for occurrence, (start, end) in enumerate(positions):
                if scope.holds(start[0]):
                    out.append(Mutant(relpath=scope.relpath, operator=name, occurrence=occurrence,
                                      line=start[0], end_line=end[0]))
    return out


def sample(mutants: Sequence[Mutant], *, size: int | None, seed: int) -> list[Mutant]:
    """`size` mutants drawn with `seed` (all of them when size is None), in id order."""
    chosen = list(mutants) if size is None or size >= len(mutants) else random.Random(seed).sample(list(mutants), size)
    return sorted(chosen, key=lambda m: (m.relpath, m.line, m.operator, m.occurrence))


def operator_for(mutant: Mutant) -> object:
    import cosmic_ray.plugins

    return cosmic_ray.plugins.get_operator(mutant.operator)()


def mutated_source(mutant: Mutant, *, site: Path) -> tuple[str, str | None]:
    """(original, mutated) text of the mutant's file; mutated is None when cosmic-ray makes no change."""
    from cosmic_ray.mutating import mutate_code

    original = (site / mutant.relpath).read_text(encoding="utf-8")
    return original, mutate_code(original, operator_for(mutant), mutant.occurrence)


def diff_text(original: str, mutated: str, *, relpath: str) -> str:
    """The mutant as a unified diff with one line of context (the reports show it)."""
    lines = difflib.unified_diff(original.splitlines(keepends=True), mutated.splitlines(keepends=True),
                                 fromfile=f"a/{relpath}", tofile=f"b/{relpath}", n=1)
    return "".join(lines)
