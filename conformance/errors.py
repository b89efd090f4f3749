"""The two roots of the suite's errors: bad input, and a target that misbehaved.

`InputError` is every error about what a user wrote or passed (scenario files, the requirement
catalogue, fault rules, an event log, target declarations, command lines): it lists every problem,
each where it is and what to do, and the CLI prints it and exits 2, never with a traceback.
`TargetMisbehaved` (conformance/failures.py) is every finding about a target under test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with an input: where (a file and line, and/or a path inside it), what, what to do."""

    what: str  # what is wrong and what to do about it
    file: str = ""
    line: int = 0  # 1-based; 0: the file as a whole
    at: str = ""  # a path inside the input, e.g. "faults[0].match.rpc" or "requirements[1] (A-1)"
    excerpt: str = ""  # the lines around `line`, marked (conformance.scenario.source)

    @property
    def where(self) -> str:
        place = f"{self.file}:{self.line}" if self.file and self.line else self.file
        return ": ".join(p for p in (place, self.at) if p)

    def render(self) -> str:
        head = f"{self.where}: {self.what}" if self.where else self.what
        return f"{head}\n{self.excerpt}" if self.excerpt else head


class InputError(ValueError):
    """Bad input: every problem found, in the order of the input (file, then line).

    With a `subject` the message is a count and one line per problem; without one (a single
    problem, e.g. an unknown target name) it is that problem.
    """

    def __init__(self, problems: str | Sequence[Problem | str], *, subject: str = "") -> None:
        if isinstance(problems, str):  # one problem, said in full
            problems = [problems]
        items = [p if isinstance(p, Problem) else Problem(what=str(p)) for p in problems]
        # Stable: problems on one line keep the order they were found in.
        self.problems: tuple[Problem, ...] = tuple(sorted(items, key=lambda p: (p.file, p.line)))
        self.subject = subject
        super().__init__(self.render())

    def render(self) -> str:
        if not self.subject and len(self.problems) == 1:
            return self.problems[0].render()
        n = len(self.problems)
        head = f"{n} problem{'' if n == 1 else 's'} in {self.subject or 'the input'}:"
        return "\n".join([head, *(p.render() for p in self.problems)])


__all__ = ["InputError", "Problem"]
