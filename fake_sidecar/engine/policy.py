"""The engine's judgement calls, in one replaceable object.

Each method is one decision the engine takes on its own rules; `EnginePolicy` gives the
reference's answer. The harness's deliberately broken engines (tests/mutants) are this class with
one method overridden, passed as `Engine(policy=...)`, so a mutant differs in that decision only
and the engine's code around it stays the one under test.
"""

from __future__ import annotations

import hmac

from taskhub_core.inbox import next_generation
from taskhub_core.turn import Decision
from taskhub_wire import pb

from fake_sidecar.engine.model import Instance, WorkRef
from fake_sidecar.engine.turns import decide


class EnginePolicy:
    """The reference engine's decisions."""

    def token_ok(self, *, current: str | None, sent: str, strict: bool) -> bool:
        """Whether a completion's token answers the current dispatch (compared in constant time).

        An empty token is accepted (legacy workers lack the field; durabletask-go and daprd accept
        it too) unless the engine runs with strict tokens: then it is refused like a stale one.
        """
        if not sent:
            return not strict
        return current is not None and hmac.compare_digest(sent.encode(), current.encode())

    def is_duplicate(self, *, inst: Instance, key: tuple[str, int], seen: set[tuple[str, int]]) -> bool:
        """R2.7: a resolution of an operation already resolved in history or earlier in this turn."""
        return key in inst.resolved or key in seen

    def applies_unmatched_activity(self, *, inst: Instance, resp: pb.ActivityResponse) -> bool:
        """Whether an activity result with no dispatch out (settled already, or never sent) is applied."""
        return False

    def decide_turn(self, *, inst: Instance, new_events: list[pb.HistoryEvent], resp: pb.WorkflowResponse,
                    now_ns: int) -> Decision:
        """What the worker's answer to a turn leads to (taskhub_core.turn)."""
        return decide(inst, new_events, resp, now_ns=now_ns)

    def redelivers(self, *, ref: WorkRef) -> bool:
        """R4.6 (a), R5.3: work out on a stream that closed unanswered is dispatched again."""
        return True

    def admits_event(self, *, inst: Instance, name: str) -> bool:
        """Whether a raised event reaches a live instance's inbox: always, also while it is suspended (R6.5, R6.7)."""
        return True

    def schedules_timer(self, *, inst: Instance, fired: pb.HistoryEvent) -> bool:
        """Whether a committed TimerCreated gets its TimerFired queued for its due time."""
        return True

    def holds(self, *, inst: Instance, event: pb.HistoryEvent) -> bool:
        """Whether a queued event waits out of the instance's turns: never (R6.7: nothing is blocked
        while an instance is suspended; the worker holds what it must)."""
        return False

    def next_generation(self, *, inst: Instance, start: pb.HistoryEvent,
                        carry: tuple[pb.HistoryEvent, ...]) -> list[tuple[pb.HistoryEvent, int]]:
        """R2.10, R6.4: a continued generation's inbox as (event, visible_at): its ExecutionStarted, the
        carried events, then what arrived meanwhile; the old generation's timers are dropped."""
        return next_generation(start, carry, inst.inbox)


REFERENCE_POLICY = EnginePolicy()
