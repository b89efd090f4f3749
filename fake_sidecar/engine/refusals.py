"""Work items that a worker keeps refusing.

A worker whose receive limit is below the sidecar's refuses a big work item by ending its
stream; it reconnects and would get the same item again, forever. After `REFUSALS` losses
in a row of the same big item, the engine holds it back (the instance stalls with
PAYLOAD_SIZE_EXCEEDED) instead. Small items are never held back: their losses are crashes
or kills, and redelivery is what makes those safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fake_sidecar.engine.model import WorkKind, WorkRef

REFUSALS = 3
REFUSABLE_BYTES = 64 * 1024



@dataclass
class RefusalTracker:
    _out: dict[WorkRef, int] = field(default_factory=dict)  # size of a big item out on a stream
    _losses: dict[WorkRef, tuple[int, int]] = field(default_factory=dict)  # (losses in a row, size)

    def dispatching(self, key: WorkRef, size: int, *, limit: int | None) -> str | None:
        """A stall description if the item must be held back; else None, and the item counts as out."""
        if size <= REFUSABLE_BYTES:
            return None
        losses, lost_size = self._losses.get(key, (0, 0))
        if losses >= REFUSALS:
            # The size of the refused sends, not this one: the description must not change with
            # each retry, or each retry would record another ExecutionStalled.
            what = ("workflow work item" if key.kind is WorkKind.TURN
                    else f"activity work item (task {key.task_id})")
            return (f"{what} of {lost_size} bytes was dispatched {losses} times and its stream ended each time "
                    f"before an answer: the worker refuses messages this large; give the worker a receive limit "
                    f"of at least {lost_size} bytes (the reference worker's --max-message-bytes) or lower this "
                    f"sidecar's --max-message-bytes ({limit if limit else 'unset'}), and restart to resume")
        self._out[key] = size
        return None

    def lost(self, key: WorkRef) -> None:
        """The item's stream ended before its answer."""
        size = self._out.pop(key, 0)
        if size:
            self._losses[key] = (self._losses.get(key, (0, 0))[0] + 1, size)

    def answered(self, key: WorkRef) -> None:
        self._out.pop(key, None)
        self._losses.pop(key, None)
