"""What a campaign reports, shared by the `conformance fuzz` command and the campaigns it runs.

Light on purpose (no Hypothesis): `conformance/cli.py` imports the fuzz command at start-up.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CampaignResult:
    """What one campaign (worker, engine or flows) did and found, for the final report."""

    label: str
    kind: str  # worker | engine | flows
    examples: int = 0
    seconds: float = 0.0
    findings: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""
    differential: Any = None  # a differential.DifferentialReport (self-oracle campaigns)


def fuzz_command(args: Any, *, worker: str | None = None, sidecar: str | None = None) -> str:
    """The `conformance fuzz` command line that runs this campaign again."""
    parts = ["conformance", "fuzz"]
    if worker:
        parts += ["--worker", worker]
    if sidecar:
        parts += ["--sidecar", sidecar]
    parts += ["--budget", str(args.budget), "--seed", str(args.seed)]
    if getattr(args, "shard", None):
        parts += ["--shard", str(args.shard)]
    return shlex.join(parts)
