"""Engine settings a scenario asks for (`engine:`), defined once for every target.

A scenario names a setting of the engine under test, not a flag of one engine: daprd takes it as its
Configuration (`spec.workflow`) or a command-line flag (conformance/targets/daprd.py), the reference
sidecar as an option of its engine (conformance/targets/reference.py), so one scenario file runs on
both. A target honours a setting when it declares the setting's capability (`engine_<setting>` in
targets.yaml); a pair that lacks it gives the scenario NOT_APPLICABLE with that reason.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any


class EngineSetting(enum.Enum):
    # daprd: spec.workflow.stateRetentionPolicy (pkg/config/configuration.go:171, v1.18.2)
    RETENTION = "retention"
    # daprd: spec.workflow.maxConcurrentWorkflowInvocations / maxConcurrentActivityInvocations
    # (pkg/runtime/wfengine/wfengine.go:239, 255)
    MAX_CONCURRENT_WORKFLOWS = "max_concurrent_workflows"
    MAX_CONCURRENT_ACTIVITIES = "max_concurrent_activities"
    # daprd: --max-body-size (the gRPC limit and the 95 % stall threshold, orchestrator/payloadsize.go:39)
    MAX_BODY_SIZE = "max_body_size"
    # the engine sends history deltas to a worker that announces WORKER_CAPABILITY_STATEFUL_HISTORY
    # (daprd after v1.18; tests/integration/suite/daprd/workflow/statefulhistory/ on master)
    STATEFUL_HISTORY = "stateful_history"
    # R6.3: a wait's timeout timer whose event won still fires, and its TimerFired reaches the worker
    # late: durabletask-go's sidecar always (its sqlite backend deletes no timer), daprd before v1.17.2,
    # and daprd v1.17.2-v1.18.0 for a later wait on a name whose earlier wait was cancelled; daprd
    # v1.18.1+ deletes the reminder (orchestrator/timer.go:148 deleteCancelledEventTimers, run.go:330).
    # true asks for the late delivery; false (the reference's default) asks for nothing.
    LATE_TIMEOUT_TIMERS = "late_timeout_timers"

    @property
    def capability(self) -> str:
        return f"engine_{self.value}"


# Settings whose value is a plain true / false.
_BOOLEAN = (EngineSetting.STATEFUL_HISTORY, EngineSetting.LATE_TIMEOUT_TIMERS)


# Statuses a retention applies to, as daprd's stateRetentionPolicy names them.
RETENTION_KEYS = ("any_terminal", "completed", "failed", "terminated")


@dataclass(frozen=True, kw_only=True)
class Retention:
    """Seconds after which a finished instance is purged; a specific status wins over any_terminal."""

    any_terminal: float | None = None
    completed: float | None = None
    failed: float | None = None
    terminated: float | None = None

    def after(self, status: str) -> float | None:
        """The retention of an instance that ended with `status` (COMPLETED, FAILED, TERMINATED)."""
        specific = {"COMPLETED": self.completed, "FAILED": self.failed, "TERMINATED": self.terminated}.get(status)
        return specific if specific is not None else self.any_terminal


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    retention: Retention | None = None
    max_concurrent_workflows: int | None = None
    max_concurrent_activities: int | None = None
    max_body_size: int | None = None  # bytes
    stateful_history: bool | None = None
    late_timeout_timers: bool | None = None

    def asked(self) -> tuple[EngineSetting, ...]:
        """The settings this scenario sets, in declaration order."""
        return tuple(EngineSetting(f.name) for f in fields(self) if getattr(self, f.name) is not None)

    def needed(self) -> tuple[EngineSetting, ...]:
        """The settings a sidecar must be able to take (its capability): every one asked, except
        `late_timeout_timers: false`, which is what an engine without the setting already does or
        declares as a gap of TMR-TIMEOUT-001."""
        return tuple(s for s in self.asked()
                     if not (s is EngineSetting.LATE_TIMEOUT_TIMERS and self.late_timeout_timers is False))

    def capabilities(self) -> frozenset[str]:
        return frozenset(s.capability for s in self.needed())

    def over(self, defaults: EngineSettings) -> EngineSettings:
        """These settings over a run's defaults (`--engine-setting`): a setting the scenario gives wins."""
        return EngineSettings(**{f.name: getattr(defaults, f.name) if getattr(self, f.name) is None
                                 else getattr(self, f.name) for f in fields(self)})


NO_SETTINGS = EngineSettings()


def parse_engine(raw: Any, *, err: Callable[[tuple[Any, ...], str], None],
                 duration: Callable[[Any, tuple[Any, ...]], float]) -> EngineSettings:
    """`engine:` of a scenario; every problem goes to `err(path, message)` (paths under ("engine",))."""
    if raw is None:
        return NO_SETTINGS
    names = [s.value for s in EngineSetting]
    if not isinstance(raw, Mapping):
        err(("engine",), f"engine settings are a mapping of {', '.join(names)}")
        return NO_SETTINGS
    values: dict[str, Any] = {}
    for key, value in raw.items():
        path = ("engine", key)
        if key not in names:
            err(path, f"unknown engine setting {key!r}; known: {', '.join(names)}")
            continue
        setting = EngineSetting(key)
        if setting is EngineSetting.RETENTION:
            values[key] = _retention(value, path, err=err, duration=duration)
        elif setting in _BOOLEAN:
            if not isinstance(value, bool):
                err(path, f"{key} is true or false, got {value!r}")
                continue
            values[key] = value
        else:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                unit = "a number of bytes" if setting is EngineSetting.MAX_BODY_SIZE else "a count"
                err(path, f"{key} is {unit} of at least 1, got {value!r}")
                continue
            values[key] = value
    return EngineSettings(**values)


def _retention(value: Any, path: tuple[Any, ...], *, err: Callable[[tuple[Any, ...], str], None],
               duration: Callable[[Any, tuple[Any, ...]], float]) -> Retention | None:
    if not isinstance(value, Mapping) or not value:
        err(path, f"retention is a mapping of {', '.join(RETENTION_KEYS)} to durations, e.g. {{completed: 1s}}")
        return None
    out: dict[str, float] = {}
    for key, d in value.items():
        if key not in RETENTION_KEYS:
            err(path + (key,), f"unknown retention status {key!r}; known: {', '.join(RETENTION_KEYS)}")
            continue
        out[key] = duration(d, path + (key,))
    return Retention(**out)


def parse_cli_settings(items: Sequence[str], *, duration: Callable[[Any], float]) -> EngineSettings:
    """`--engine-setting NAME=VALUE` (repeatable), VALUE in YAML (`true`, `3`, `{completed: 1s}`), as a
    scenario's `engine:` would give it; raises ValueError naming every bad item and what to write."""
    import yaml

    from conformance.yamlload import safe_load

    raw: dict[str, Any] = {}
    problems: list[str] = []
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            problems.append(f"--engine-setting {item!r}: write NAME=VALUE, e.g. late_timeout_timers=true")
            continue
        try:
            raw[name.strip()] = safe_load(text)
        except yaml.YAMLError as exc:
            problems.append(f"--engine-setting {item!r}: VALUE is not YAML ({str(exc).splitlines()[0]})")

    def err(path: tuple[Any, ...], message: str) -> None:
        problems.append(f"--engine-setting {path[1] if len(path) > 1 else ''}: {message}")

    def seconds(value: Any, path: tuple[Any, ...]) -> float:
        try:
            return duration(value)
        except ValueError as exc:
            err(path, str(exc))
            return 0.0

    settings = parse_engine(raw, err=err, duration=seconds) if raw else NO_SETTINGS
    if problems:
        raise ValueError("; ".join(problems))
    return settings


def daprd_workflow_spec(settings: EngineSettings) -> dict[str, Any]:
    """daprd's Configuration `spec.workflow` for these settings (empty: none to write)."""
    spec: dict[str, Any] = {}
    if settings.max_concurrent_workflows is not None:
        spec["maxConcurrentWorkflowInvocations"] = settings.max_concurrent_workflows
    if settings.max_concurrent_activities is not None:
        spec["maxConcurrentActivityInvocations"] = settings.max_concurrent_activities
    if settings.retention is not None:
        names = {"any_terminal": "anyTerminal", "completed": "completed", "failed": "failed",
                 "terminated": "terminated"}
        spec["stateRetentionPolicy"] = {names[k]: _go_duration(getattr(settings.retention, k))
                                        for k in RETENTION_KEYS if getattr(settings.retention, k) is not None}
    return spec


def _go_duration(seconds: float) -> str:
    """A Go time.ParseDuration string, whole milliseconds."""
    return f"{round(seconds * 1000)}ms"


def settings_of(options: Mapping[str, Any]) -> EngineSettings:
    """The settings a starter was handed (`options["engine"]`), or none."""
    got = options.get("engine")
    return got if isinstance(got, EngineSettings) else NO_SETTINGS
