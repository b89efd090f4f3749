"""What an SDK release lacks, asked of its driver before the driver runs a scenario.

A command worker may declare `probe:` in its target (a command line with `{root}` and `{python}`
placeholders, typically the driver with `--probe`). The probe prints one JSON line,
`{"sdk": "<dist> <version>", "absent": {capability: reason}}`, found by probing the installed
SDK's API (drivers/python/driver.py). The target's capabilities are then the declared ones minus
the absent ones, so a scenario that requires what this release lacks is NOT_APPLICABLE instead of
failing, and one target declaration serves every release of the SDK (issue #25 item 5).

A probe that cannot run (the SDK is not installed: the preflight says so) or prints something
else leaves the declared capabilities as they are.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from conformance.targets.base import WorkerTarget

PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Probed:
    sdk: str
    absent: Mapping[str, str]


def probed(target: WorkerTarget, *, root: Path) -> WorkerTarget:
    """The target with the capabilities its installed SDK release lacks taken off."""
    if not target.probe:
        return target
    found = run_probe(target.probe, str(root))
    if found is None:
        return target
    return replace(target, capabilities=target.capabilities - frozenset(found.absent), probed=found)


@lru_cache(maxsize=None)
def run_probe(command: str, root: str) -> Probed | None:
    argv = [a.format(root=root, python=sys.executable) for a in shlex.split(command)]
    if not Path(argv[0]).exists() and "/" in argv[0]:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, cwd=root,
                              env=_env(root))
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        doc = json.loads(done.stdout.strip().splitlines()[-1])
        absent = {str(k): str(v) for k, v in dict(doc["absent"]).items()}
        return Probed(sdk=str(doc.get("sdk", "")), absent=MappingProxyType(absent))
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _env(root: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = root
    return env
