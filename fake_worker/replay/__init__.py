"""Pure replay executor: (program, past events, new events) -> actions, custom status, patches."""

from fake_worker.replay.executor import TurnResult, execute

__all__ = ["TurnResult", "execute"]
