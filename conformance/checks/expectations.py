"""The `expectations` check: status, output, custom status, failure, stall and history of each
instance a flow scenario names."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from taskhub_wire.kinds import EventKind

from conformance.checks.base import FlowObservation, check, fail, resolve_instance
from conformance.scenario.matching import Matcher, contains_in_order, exactly
from conformance.scenario.basics import MISSING
from conformance.scenario.model import Expectation
from conformance.verdict import Level, Mismatch, Subject


def _payload(text: str | None) -> Any:
    if text is None:
        return None  # no output: `output: null` expects exactly this
    try:
        return json.loads(text)
    except ValueError:
        return text


@check("expectations", always=True)
def expectations(obs: FlowObservation) -> None:
    """Status, output, custom status, failure, stall and history of every instance the scenario names."""
    out: list[Mismatch] = []
    m = Matcher()
    for key, exp in obs.scenario.expect.items():
        found: list[str | Mismatch] = []
        iid = resolve_instance(obs, key)
        state = obs.states.get(iid)
        where = f"instance {key!r} ({iid})" + (f" [{exp.span}]" if exp.span else "")
        if exp.exists is not None:
            if bool(state) != exp.exists:
                found.append(Mismatch(text=f"{where}: expected exists={exp.exists}, got exists={bool(state)}",
                                      expected=f"exists={exp.exists}", got=f"exists={bool(state)}",
                                      subject=Subject.EXISTS))
        if state is None and exp.exists is None:
            found.append(Mismatch(text=f"{where}: no such instance on the sidecar", subject=Subject.EXISTS))
        elif state is not None:
            found.extend(_state_mismatches(m, exp, state, obs.histories.get(iid, []), where))
        # Each mismatch is about the expectation it breaks: there, in the scenario file.
        location = str(exp.span) if exp.span else ""
        out += [replace(x if isinstance(x, Mismatch) else Mismatch(text=x, subject=Subject.HISTORY), location=location,
                        instance=iid) for x in found]
    fail(obs, "expectations", out)


def _state_mismatches(m: Matcher, exp: Expectation, state: Mapping[str, Any], history: list[dict[str, Any]],
                      where: str) -> list[str | Mismatch]:
    out: list[str | Mismatch] = []
    if exp.status is not None and state["status"] != exp.status:
        why = ""
        if state.get("failure"):
            why = f" ({state['failure'].get('errorType')}: {state['failure'].get('errorMessage', '')[:200]})"
        out.append(Mismatch(text=f"{where}: expected status {exp.status}, got {state['status']}{why}",
                            expected=exp.status, got=state["status"], subject=Subject.STATUS))
    if exp.output is not MISSING:
        out += [Mismatch(text=f"{where}: output {x}", subject=Subject.OUTPUT)
                for x in m.match(exp.output, _payload(state.get("output")), "$")]
    if exp.custom_status is not MISSING:
        out += [Mismatch(text=f"{where}: custom status {x}", subject=Subject.CUSTOM_STATUS)
                for x in m.match(exp.custom_status, state.get("custom_status"), "$")]
    failure = state.get("failure") or {}
    # Error type names and messages are the SDK language's (a Java class, a Go error): observations.
    if exp.failure_type is not None and m.match(exp.failure_type, failure.get("errorType")):
        out.append(Mismatch(text=f"{where}: expected failure type {exp.failure_type!r}, got "
                                 f"{failure.get('errorType')!r}", level=Level.OBSERVATION, field="failure.errorType",
                            subject=Subject.FAILURE))
    if exp.failure_message is not None and not re.search(exp.failure_message, failure.get("errorMessage", "")):
        out.append(Mismatch(text=f"{where}: failure message {failure.get('errorMessage', '')!r} does not match "
                                 f"/{exp.failure_message}/", level=Level.OBSERVATION, field="failure.errorMessage",
                            subject=Subject.FAILURE))
    if exp.stall_reason is not None or exp.stall_description is not None:
        stalls = [e for e in history if e["kind"] == EventKind.EXECUTION_STALLED]
        if not stalls:
            out.append(Mismatch(text=f"{where}: expected an ExecutionStalled event in history, found none",
                                subject=Subject.STALL))
        else:
            last = stalls[-1]
            reason = last.get("reason", "PATCH_MISMATCH")  # proto JSON omits the zero value
            if exp.stall_reason is not None and reason != exp.stall_reason:
                out.append(Mismatch(text=f"{where}: expected stall reason {exp.stall_reason}, got {reason}",
                                    subject=Subject.STALL))
            if exp.stall_description is not None and not re.search(exp.stall_description, last.get("description", "")):
                out.append(Mismatch(text=f"{where}: stall description {last.get('description')!r} does not match "
                                         f"/{exp.stall_description}/", subject=Subject.STALL))
    if exp.history is not None:
        h = exp.history
        if h.contains_in_order is not None:
            why = contains_in_order(m, h.contains_in_order, history)
            if why:
                out.append(f"{where}: {why}")
        if h.exactly is not None:
            why = exactly(m, h.exactly, history)
            if why:
                out.append(f"{where}: {why}")
        kinds = [e["kind"] for e in history]
        for kind in h.not_contains:
            if kind in kinds:
                out.append(f"{where}: history must not contain {kind}, found {kinds.count(kind)}")
        for kind, n in h.count.items():
            if kinds.count(kind) != n:
                out.append(f"{where}: expected {n} {kind} event(s), got {kinds.count(kind)}")
    return out
