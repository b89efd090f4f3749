"""Patch and version rules of a turn (engine-rules §7; as dapr/dapr checks them).

A turn stalls when a worker reports a version it does not have, or patches that do not extend the
ones history recorded; otherwise its WorkflowStarted records the patches new to history (a
multiset difference, R3.15) and the version name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from taskhub_wire import pb

Stall = tuple[int, str]  # (pb.StalledReason, description), as ExecutionStalled records it


def reported_patches(resp: pb.WorkflowResponse) -> list[str]:
    return list(resp.version.patches) if resp.HasField("version") else []


def version_stall(resp: pb.WorkflowResponse, *, recorded_version: str) -> Stall | None:
    """VERSION_NOT_AVAILABLE when any action says so."""
    if any(a.HasField("workflowVersionNotAvailable") for a in resp.actions):
        return (pb.VERSION_NOT_AVAILABLE, f"Version not available: {recorded_version}")
    return None


def patch_stall(resp: pb.WorkflowResponse, *, recorded: Sequence[str]) -> Stall | None:
    """PATCH_MISMATCH when the reported patches do not start with the recorded ones."""
    current = reported_patches(resp)
    if recorded and current[: len(recorded)] != list(recorded):
        return (pb.PATCH_MISMATCH, f"Patch mismatch. History patches: [{', '.join(recorded)}], "
                                   f"current patches: [{', '.join(current)}]. ")
    return None


def new_patches(recorded: Sequence[str], current: Sequence[str]) -> list[str]:
    """`current` without the patches history holds already (multiset difference), in first-seen order."""
    left = Counter(recorded)
    out = []
    for p in current:
        if left[p] > 0:
            left[p] -= 1
        else:
            out.append(p)
    return out


def record_version(started: pb.HistoryEvent, resp: pb.WorkflowResponse, *, recorded: Sequence[str]) -> None:
    """Write the turn's new patches and its version name into its WorkflowStarted `started`."""
    if not resp.HasField("version") or not (resp.version.patches or resp.version.HasField("name")):
        return
    fresh = new_patches(recorded, resp.version.patches)
    if fresh or resp.version.HasField("name"):
        v = started.workflowStarted.version
        v.patches.extend(fresh)
        if resp.version.HasField("name"):
            # dapr/dapr drops the name when compacting; the reference keeps it (hazard in
            # patching-and-stall.md §2).
            v.name = resp.version.name


# R3.14 (b) REF: an answer refused (malformed, R3.13; stale, R3.14) this many times in a row stalls
# the instance instead of looping: reason and count in its history and GetInstance (STALLED), and a
# worker that connects again (new code, R7.4) gets the turn. daprd has no refusal (it records every
# action); STALLED is its status for "the deployed code does not replay this history" (§7).
REFUSALS_BEFORE_STALL = 5


def refusal_stall(reason: str, *, refusals: int) -> Stall:
    """The stall of an instance whose answer was refused `refusals` times in a row for `reason`."""
    return (pb.PATCH_MISMATCH, f"the worker's answer was refused {refusals} times in a row: {reason}; "
                               "the deployed code does not replay this history")

