"""The reference engine: instance state, history, inbox, timers, dispatch, tokens, stalls, store."""

from fake_sidecar.engine.clock import Clock, RealClock, VirtualClock
from fake_sidecar.engine.core import Engine, EngineConfig, TaskExecutionIdMode
from fake_sidecar.engine.errors import EngineError
from fake_sidecar.engine.model import CompletionOutcome
from fake_sidecar.engine.policy import EnginePolicy

__all__ = ["Clock", "CompletionOutcome", "Engine", "EngineConfig", "EngineError", "EnginePolicy", "RealClock",
           "TaskExecutionIdMode", "VirtualClock"]
