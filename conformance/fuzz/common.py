"""Budgets, progress lines, findings and the Hypothesis settings campaigns share."""

from __future__ import annotations

import enum
import hashlib
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable
from typing import Any, TextIO

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hseed
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

DEFAULT_DATABASE = Path(".hypothesis") / "conformance-fuzz"


@dataclass(frozen=True)
class Budget:
    """A time budget (seconds) or a number of examples."""

    seconds: float | None = None
    examples: int | None = None

    @classmethod
    def parse(cls, text: str | int | float) -> "Budget":
        """`10m`, `90s`, `1h`, `500ms` (time), or a bare number `500` (examples)."""
        raw = str(text).strip()
        if re.fullmatch(r"\d+", raw):
            return cls(examples=int(raw))
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h)", raw)
        if not m:
            raise ValueError(f"budget {raw!r}: use a time like 10m, 90s, 1h or a number of examples like 500")
        scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        return cls(seconds=float(m.group(1)) * scale)

    def describe(self) -> str:
        if self.seconds is not None:
            return _clock(self.seconds)
        return f"{self.examples} examples"

    def share(self, parts: int) -> "Budget":
        """This budget split evenly between `parts` campaigns."""
        parts = max(1, parts)
        if self.seconds is not None:
            return Budget(seconds=self.seconds / parts)
        return Budget(examples=max(1, (self.examples or 0) // parts))


_IMPORTED = time.monotonic()


def process_began() -> float:
    """The `time.monotonic()` at which this process started, so that a budget counts the
    interpreter's start and the imports too (Linux: the process's start time in /proc, on the
    same boot-based clock; elsewhere: when this module was imported)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        began = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # starttime: ticks since boot
    except (OSError, ValueError, IndexError):
        return _IMPORTED
    now = time.monotonic()
    # CLOCK_MONOTONIC counts from boot on Linux too; anything else falls back to the import time.
    return began if 0 <= now - began <= now - _IMPORTED + 600 else _IMPORTED


@dataclass
class Clock:
    budget: Budget
    began: float = field(default_factory=time.monotonic)
    examples: int = 0
    grace: float | None = None  # seconds past a time budget for the shrink in progress (None: 30 s or a quarter)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def exhausted(self) -> bool:
        if self.budget.seconds is not None:
            return self.elapsed >= self.budget.seconds
        return self.examples >= (self.budget.examples or 0)

    def remaining_examples(self, default: int) -> int:
        if self.budget.examples is not None:
            return max(0, self.budget.examples - self.examples)
        return default

    def hard_stop(self) -> bool:
        """Past the budget plus a grace for the shrink in progress: examples then pass at once."""
        if self.budget.seconds is None:
            return False
        grace = max(30.0, 0.25 * self.budget.seconds) if self.grace is None else self.grace
        return self.elapsed >= self.budget.seconds + grace


class Stage(enum.Enum):
    """Where a campaign's time goes. Only SEARCH turns count towards its rate."""

    STARTUP = "start-up"  # program pools, driver processes (and their restarts between rounds)
    WARMUP = "warm-up"  # the first example on freshly started processes (imports, first calls)
    SEARCH = "search"  # generating histories and checking every turn of them
    SHRINK = "after a finding"  # shrinking, and Hypothesis' search around a finding


@dataclass
class Timeline:
    """Seconds and turns per `Stage`, and the counts of what made the waits (process start-ups,
    waits that timed out, turns failed over to another process)."""

    seconds: dict[Stage, float] = field(default_factory=dict)
    turns: dict[Stage, int] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)
    cpu: dict[Stage, float] = field(default_factory=dict)  # this process's CPU seconds (all its threads)

    def add(self, phase: Stage, *, seconds: float, turns: int = 0, cpu: float = 0.0) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        self.turns[phase] = self.turns.get(phase, 0) + turns
        self.cpu[phase] = self.cpu.get(phase, 0.0) + cpu

    def rate(self) -> float:
        """Turns checked per second of search."""
        took = self.seconds.get(Stage.SEARCH, 0.0)
        return self.turns.get(Stage.SEARCH, 0) / took if took > 0 else 0.0

    def describe(self) -> str:
        parts = [f"{self.turns.get(Stage.SEARCH, 0)} turns checked in {self.seconds.get(Stage.SEARCH, 0.0):.1f}s of "
                 f"search ({self.rate():.0f}/s)"]
        if self.turns.get(Stage.SEARCH) and self.cpu.get(Stage.SEARCH):
            # The harness's own cost (its sidecars' gRPC edge included, the drivers' processes not):
            # what bounds the rate on a busy machine, where waits stretch but CPU per turn does not.
            parts.append(f"harness CPU {1000 * self.cpu[Stage.SEARCH] / self.turns[Stage.SEARCH]:.2f} ms per turn")
        for phase in (Stage.STARTUP, Stage.WARMUP, Stage.SHRINK):
            if phase in self.seconds:
                turns = self.turns.get(phase, 0)
                parts.append(f"{phase.value} {self.seconds[phase]:.1f}s" + (f" ({turns} turns)" if turns else ""))
        if self.costs:
            parts.append(", ".join(f"{k} {v:.1f}" if isinstance(v, float) and not v.is_integer() else f"{k} {int(v)}"
                                   for k, v in sorted(self.costs.items())))
        return "; ".join(parts)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


@dataclass
class Progress:
    """One status line every `every` seconds while a campaign runs."""

    label: str
    out: TextIO | None = None
    every: float = 5.0
    last: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def tick(self, clock: Clock, *, findings: int, force: bool = False, extra: str = "") -> None:
        now = time.monotonic()
        if self.out is None or (not force and now - self.last < self.every):
            return
        self.last = now
        rate = clock.examples / clock.elapsed if clock.elapsed > 0 else 0.0
        budget = f"/{clock.budget.describe()}" if clock.budget.seconds is not None else \
            f" ({clock.examples}/{clock.budget.examples} examples)"
        counts = " ".join(f"{k} {v}" for k, v in sorted(self.counters.items()))
        print(f"[fuzz {self.label}] {_clock(clock.elapsed)}{budget} examples {clock.examples} ({rate:.1f}/s) "
              f"{counts} findings {findings}{(' ' + extra) if extra else ''}", file=self.out, flush=True)

    def say(self, text: str) -> None:
        if self.out is not None:
            print(f"[fuzz {self.label}] {text}", file=self.out, flush=True)


class FindingError(AssertionError):
    """Raised inside a property: one subclass per finding signature, so Hypothesis shrinks each
    kind of difference on its own (an 'interesting origin' includes the exception type)."""

    finding: Any = None

    def __init__(self, finding: Any) -> None:
        super().__init__(getattr(finding, "headline", lambda: str(finding))())
        self.finding = finding


_CLASSES: dict[str, type[FindingError]] = {}


def finding_error(signature: str) -> type[FindingError]:
    cls = _CLASSES.get(signature)
    if cls is None:
        cls = type("Finding_" + hashlib.sha1(signature.encode()).hexdigest()[:10], (FindingError,), {})
        _CLASSES[signature] = cls
    return cls


def seed_for(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big")


class KeyedDatabase(ExampleDatabase):
    """One campaign's share of an example database: every key carries the campaign's prefix.

    Hypothesis keys a test's examples by the test function; the campaigns define one function per
    chunk, target and program pool, so the prefix (`key(...)`) is what keeps their examples apart,
    through the database's public interface."""

    def __init__(self, inner: ExampleDatabase, prefix: bytes) -> None:
        super().__init__()
        self._inner, self._prefix = inner, prefix

    def save(self, key: bytes, value: bytes) -> None:
        self._inner.save(self._prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self._inner.fetch(self._prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self._inner.delete(self._prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._inner.move(self._prefix + src, self._prefix + dest, value)


def hypothesis_settings(*, max_examples: int, database: Path | None, share: bytes = b"",
                        derandomize: bool = False, shrink: bool = True, stateful_step_count: int | None = None,
                        multiple_bugs: bool = True) -> settings:
    """A campaign's settings; `share` (from `key(...)`) names its share of `database`."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if shrink else [])
    kw: dict[str, Any] = {}
    if stateful_step_count is not None:
        kw["stateful_step_count"] = stateful_step_count
    db: ExampleDatabase | None = None
    if database is not None:
        db = KeyedDatabase(DirectoryBasedExampleDatabase(str(database)), share)
    return settings(max_examples=max(1, max_examples), deadline=None, derandomize=derandomize,
                    database=db, suppress_health_check=list(HealthCheck), phases=phases,
                    report_multiple_bugs=multiple_bugs, print_blob=False, verbosity=Verbosity.quiet, **kw)


def configured(test: Any, *, with_settings: settings, seed: int | None = None) -> Any:
    """`test` (made by `@given`) with `with_settings`, drawing from `seed` when one is given.

    Hypothesis' `@seed` turns the example database off (it is meant for reproducing one failure),
    so a seeded campaign would never replay what earlier campaigns, or other shards of this one,
    saved: the settings are applied after it, and so keep the database."""
    if seed is not None:
        test = hseed(seed)(test)
    return with_settings(test)


def key(*parts: Any) -> bytes:
    """A campaign's share of the example database (which campaign, target, program pool)."""
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()


def say(out: TextIO | None, text: str) -> None:
    if out is not None:
        print(text, file=out, flush=True)


STDOUT = sys.stdout


def other_errors(exc: BaseException) -> list[BaseException]:
    """The exceptions in a Hypothesis report (one, or a group of them) that are not findings."""
    if isinstance(exc, BaseExceptionGroup):
        return [e for sub in exc.exceptions for e in other_errors(sub)]
    if isinstance(exc, FindingError) or "Flaky" in type(exc).__name__:
        return []
    return [exc]
