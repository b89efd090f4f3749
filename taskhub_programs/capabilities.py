"""Which target capability each construct of a bundle needs (the names of conformance/targets/targets.yaml).

The one table that links the program language to the capabilities a worker target declares: a
driver whose SDK release lacks a capability (found by probing the SDK's API at start) refuses a
bundle that uses it, naming the step, instead of failing somewhere inside the SDK.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from taskhub_programs.language import (
    Bundle, CallActivity, CallChild, ContinueAsNew, IfPatched, Spawn, Step, Timer, WaitEvent, walk_steps,
)

# Step kind -> the capability every step of that kind needs.
# `spawn` (a detached workflow started by the workflow's own code) needs `detached_spawn`.
STEP_NEEDS: dict[type, str] = {CallChild: "children", Timer: "timers", WaitEvent: "events", IfPatched: "patching",
                               Spawn: "detached_spawn"}
VERSIONS, RETRIES, CARRY_EVENTS = "versions", "retries", "carry_events"
# A retry policy with a total `timeout` (not every SDK's policy has one, e.g. durabletask-js's).
RETRY_TIMEOUT = "retry_timeout"
# Workflows across apps (`app:`) and history propagation (`propagation:`, the `propagated` built-in;
# with the input {"events": true} it also lists each chunk's events).
CROSSAPP, PROPAGATION, PROPAGATED_EVENTS = "crossapp", "propagation", "propagated_events"


def needs(bundle: Bundle) -> Iterator[tuple[str, str]]:
    """(capability, path) for every use in the bundle of a construct that needs a capability."""
    for name, family in bundle.programs.items():
        base = f"$.programs.{name}"
        if family.versioned:
            yield VERSIONS, f"{base}.versions"
        for vname, program in family.versions.items():
            yield from _steps(program.steps, base + (f".versions.{vname}" if vname else "") + ".steps")


def _steps(steps: Sequence[Step], path: str) -> Iterator[tuple[str, str]]:
    for here, step in walk_steps(steps, path):
        if type(step) in STEP_NEEDS:
            yield STEP_NEEDS[type(step)], here
        if isinstance(step, (CallActivity, CallChild)) and step.retry is not None:
            yield RETRIES, f"{here}.retry"
            if step.retry.timeout is not None:
                yield RETRY_TIMEOUT, f"{here}.retry.timeout"
        if isinstance(step, (CallActivity, CallChild)) and step.app is not None:
            yield CROSSAPP, f"{here}.app"
        if isinstance(step, (CallActivity, CallChild)) and step.propagation is not None:
            yield PROPAGATION, f"{here}.propagation"
        if isinstance(step, CallActivity) and step.name == "propagated":
            yield PROPAGATION, f"{here}.name"
            if _asks_events(step.input):
                yield PROPAGATED_EVENTS, f"{here}.input"
        if isinstance(step, ContinueAsNew) and step.carry_events:
            yield CARRY_EVENTS, f"{here}.carry_events"


def _asks_events(expr: object) -> bool:
    """A literal {"events": true} input (the parser keeps a literal mapping as it is)."""
    return expr == {"events": True}
