"""An instance as the pure rules see it: frozen, built by a shell from its own records."""

from __future__ import annotations

from dataclasses import dataclass, field

from taskhub_wire import pb

from taskhub_core.history import Facts, start_event


@dataclass(frozen=True)
class InboxItem:
    """An event waiting for a turn; it may be taken from `visible_at` (ns) on. Ordered by `seq`."""

    seq: int
    visible_at: int
    event: pb.HistoryEvent


@dataclass(frozen=True, kw_only=True)
class InstanceState:
    iid: str
    name: str
    execution_id: str = ""
    generation: int = 0
    history: tuple[pb.HistoryEvent, ...] = ()
    facts: Facts = field(default_factory=Facts)
    inbox: tuple[InboxItem, ...] = ()
    custom_status: str | None = None
    next_seq: int = 1  # the seq the next inbox item gets (a shell with seqs of its own ignores it)

    def start_event(self) -> pb.HistoryEvent | None:
        """This generation's ExecutionStarted: in history, or still in the inbox."""
        return start_event(self.history, self.inbox)
