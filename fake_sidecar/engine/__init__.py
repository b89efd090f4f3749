"""Pure engine core: instance state, history, inbox, timers, dispatch, tokens, stalls, store."""

from fake_sidecar.engine.clock import Clock, RealClock, VirtualClock
from fake_sidecar.engine.core import Engine, EngineConfig, TaskExecutionIdMode
from fake_sidecar.engine.errors import EngineError

__all__ = ["Clock", "Engine", "EngineConfig", "EngineError", "RealClock", "TaskExecutionIdMode", "VirtualClock"]
