"""What an SDK release lacks, asked of its driver before the driver runs a scenario.

A command worker may declare `probe:` in its target (a command line with `{root}` and `{python}`
placeholders, typically the driver with `--probe`). The probe prints one JSON line,
`{"sdk": "<dist> <version>", "absent": {capability: reason}}`, found by probing the installed
SDK's API (drivers/python/driver.py). The target's capabilities are then the declared ones minus
the absent ones, so a scenario that requires what this release lacks is NOT_APPLICABLE instead of
failing, and one target declaration serves every release of the SDK (issue #25 item 5).

A probe whose program is not there (the SDK is not installed: the preflight says so) leaves the
declared capabilities as they are. A probe that runs and fails, or prints something else, stops the
run before any scenario (TargetError, exit 2): the release would otherwise be judged on what the pinned
release can do.

A scenario that requires a capability the probe found absent is NOT_APPLICABLE with the reason
"SDK release <dist> <version> lacks <capability> (probed: <why>)" (`lacking`).
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

from conformance.targets.base import TargetError, WorkerTarget

PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Probed:
    sdk: str  # "<distribution> <version>" as installed
    absent: Mapping[str, str]  # capability -> why the release lacks it


def lacking(missing: list[str], probed: Probed | None) -> str:
    """Why a pair lacks `missing`: the probed release's own absences first, then the rest."""
    absent = probed.absent if probed is not None else {}
    by_probe = [c for c in missing if c in absent]
    rest = [c for c in missing if c not in absent]
    parts = []
    if by_probe and probed is not None:
        parts.append(f"SDK release {probed.sdk} lacks " + "; ".join(f"{c} (probed: {absent[c]})" for c in by_probe))
    if rest:
        parts.append(f"the pair lacks capabilit{'ies' if len(rest) > 1 else 'y'} {', '.join(rest)}")
    return "; ".join(parts)


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
    if "/" in argv[0] and not Path(argv[0]).exists():
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, cwd=root,
                              env=_env(root))
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"the probe {shlex.join(argv)} could not run: {exc}") from None
    tail = (done.stderr.strip() or done.stdout.strip())[-1500:]
    if done.returncode != 0:
        raise TargetError(f"the probe {shlex.join(argv)} exited {done.returncode}; the SDK release could not be "
                          f"asked what it lacks, so it is not run on the pinned release's capabilities:\n{tail}")
    try:
        doc = json.loads(done.stdout.strip().splitlines()[-1])
        absent = {str(k): str(v) for k, v in dict(doc["absent"]).items()}
        return Probed(sdk=str(doc.get("sdk", "")), absent=MappingProxyType(absent))
    except (ValueError, KeyError, IndexError, TypeError):
        raise TargetError(f"the probe {shlex.join(argv)} printed no JSON line "
                          f'{{"sdk": ..., "absent": {{capability: reason}}}}:\n{tail}') from None


def _env(root: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = root
    return env
