"""The sidecar's side of a turn: its `Instance` record as the pure core's `InstanceState`, and the
payload limits it enforces before dispatching.

The rules themselves are in `taskhub_core` (`turn.decide_turn`, `machine.apply`); the engine
commits what they decide through its store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from taskhub_core.history import Facts
from taskhub_core.state import InboxItem, InstanceState
from taskhub_core.turn import Decision, decide_turn
from taskhub_wire import pb

from fake_sidecar.engine.model import Instance


def core_state(inst: Instance) -> InstanceState:
    """A frozen copy of what the pure rules read of `inst`."""
    return InstanceState(iid=inst.iid, name=inst.name, execution_id=inst.execution_id, generation=inst.generation,
                         history=tuple(inst.history), facts=Facts.of(inst),
                         inbox=tuple(InboxItem(seq=e.seq, visible_at=e.visible_at, event=e.event) for e in inst.inbox),
                         custom_status=inst.custom_status)


def decide(inst: Instance, new_events: Sequence[pb.HistoryEvent], resp: pb.WorkflowResponse, *,
           now_ns: int) -> Decision:
    return decide_turn(core_state(inst), new_events, resp, now_ns=now_ns)


def payload_size(inst: Instance) -> int:
    """What daprd weighs before a turn: the received history, the history and the inbox
    (orchestrator/payloadsize.go:52-59)."""
    return (len(inst.incoming or b"") + sum(e.ByteSize() for e in inst.history)
            + sum(e.event.ByteSize() for e in inst.inbox))


@dataclass(frozen=True)
class PayloadLimit:
    """The PAYLOAD_SIZE_EXCEEDED rule (daprd's 95 % of --max-body-size) and the flag that sets it."""

    limit: int
    flag: str

    def workflow_oversize(self, size: int) -> str | None:
        """The stall description when a turn of `size` bytes is too big to dispatch, else None."""
        if size <= 0.95 * self.limit:
            return None
        return (f"Workflow payload size {size} bytes exceeds 95% of max gRPC body size {self.limit} bytes; "
                f"increase {self.flag} and restart to resume")

    def activity_oversize(self, req: pb.ActivityRequest) -> str | None:
        size = req.ByteSize()
        if size <= 0.95 * self.limit:
            return None
        return (f"activity '{req.name}::{req.taskId}' payload {size} bytes exceeds 95% of max gRPC body size "
                f"{self.limit} bytes; increase {self.flag} and restart to resume")
