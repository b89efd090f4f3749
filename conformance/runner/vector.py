"""A vector scenario: one hand-made turn sent to the worker, its answer observed."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

from taskhub_core.delivery import suspended_after, terminates
from taskhub_core.history import is_optional_timer
from taskhub_wire.kinds import PRODUCED_FIELDS, ActionKind, event_kind

from conformance.checks import VectorObservation
from conformance.dialects.resume import AT_ONCE, waits_between_released
from conformance.events import Channel, MessageDirection, TranscriptEntry
from conformance.scenario.model import Compare, Reach
from conformance.scenario.wire import event_dict
from conformance.runner.harness import Run
from conformance.runner.observe import replayer

def run_vector(run: Run, stack: ExitStack, *, transcript: list[TranscriptEntry]) -> VectorObservation:
    """A turn-level vector: the reference sidecar hands the turn, in the worker's dialect, to the worker under test.
    The turn sent and the worker's answer are appended to `transcript` (no proxy stands between them)."""
    vec = run.scenario.vector
    assert vec is not None
    from taskhub_programs import parse_bundle

    from conformance.dialects.compare import engine_view, profile_for, relax
    from conformance.dialects.vectors import in_dialect

    bundle = parse_bundle({"programs": run.scenario.programs_doc})
    turn = in_dialect(vec, capabilities=run.pair.worker.capabilities, programs=run.scenario.programs_doc)
    replay = replayer(run, bundle, stack)
    assert replay is not None
    transcript.append(_turn_item(run, turn.instance_id, turn.past, turn.new))
    raw = replay(turn.instance_id, list(turn.past), list(turn.new))
    transcript.append(_answer_entry(run, turn.instance_id, raw))
    answer = turn.to_reference(raw)
    # Only what an engine applies is compared (default child ids, first completion wins, ...).
    expected = tuple(engine_view(list(turn.expected), vec.instance_id, wire=False))
    if answer is not None:
        answer = {**answer, "actions": engine_view(answer["actions"], vec.instance_id, wire=False)}
    if vec.compare is Compare.FUZZ:  # a regression vector: judged by the worker's profile, as a campaign would
        profile = profile_for(run.pair.worker.name, run.pair.worker.capabilities)
        expected = tuple(relax(p, profile, answer=False) for p in expected)
        if answer is not None:
            custom = answer.get("custom_status")
            answer = {**answer, "actions": [relax(a, profile, answer=True) for a in answer["actions"]],
                      "custom_status": None if custom == "" and profile.empty_custom_status_is_none else custom}
    # A fuzz finding's history was built from the reference's answers; in_dialect shifts ids and strips wait
    # timers for the worker, but a worker whose event waits take ids of their own (event_wait_ids) is never
    # sent such a history by an engine.
    # The same holds for a hand-written vector whose past records actions of a program with event waits: the
    # reference numbered them without ids for the waits, so the recorded ids do not line up for such a worker.
    own_wait_ids = "event_wait_ids" in run.pair.worker.capabilities
    waits_in_past = _has_wait(run.scenario.programs_doc) and any(
        e.WhichOneof("eventType") in PRODUCED_FIELDS and not e.HasField("executionCompleted") for e in turn.past)
    # And a worker that applies the events held while suspended all at once on resume never makes the wait
    # timers the reference recorded between them (conformance/dialects/resume.py).
    between = waits_between_released(turn.past) if AT_ONCE in run.pair.worker.capabilities else ()
    foreign = ("built from the reference worker's answers, which it numbers differently"
               if own_wait_ids and (vec.compare is Compare.FUZZ or waits_in_past) else
               "impossible for any worker" if vec.history is Reach.IMPOSSIBLE else
               f"its past records wait timers for {', '.join(repr(n) for n in between)} made between events held "
               "while suspended, which this worker applies at once on resume" if between else "")
    # A turn that delivers ExecutionTerminated ends the instance whatever the answer: the engine drops the
    # turn's actions and the termination wins over a continue-as-new (R3.16), so no answer differs there.
    terminated = terminates(turn.new)
    # A turn that leaves the instance suspended may be answered with no actions: the worker holds what the
    # events before the suspension let the code do until the resume (EVT-SUSP-001; durabletask-go does).
    held = suspended_after(turn.new, suspended=False)
    return VectorObservation(scenario=run.scenario, reproduce=run.reproduce, answer=answer, expected=expected,
                             note=turn.note, foreign=foreign, overridden=terminated, held=held,
                             recorded=_recorded_actions(vec.past + vec.new))


def _turn_item(run: Run, instance_id: str, past: Any, new: Any) -> TranscriptEntry:
    """The turn as the worker receives it: a GetWorkItems stream item, described as the proxy describes one."""
    from taskhub_wire import pb

    from conformance.proxy.describe import summarize, to_dict

    item = pb.WorkItem(workflowRequest=pb.WorkflowRequest(instanceId=instance_id, pastEvents=list(past),
                                                          newEvents=list(new)))
    return TranscriptEntry(t=round(time.monotonic() - run.began, 6), channel=Channel.WORKER,
                           direction=MessageDirection.ITEM, rpc="GetWorkItems",
                           summary=summarize("GetWorkItems", "item", item, 0), message=to_dict(item))


def _answer_entry(run: Run, instance_id: str, answer: Mapping[str, Any] | None) -> TranscriptEntry:
    """The worker's answer in its own numbering (None: none in time), as plain data."""
    from conformance.proxy.describe import short, truncate

    t = round(time.monotonic() - run.began, 6)
    if answer is None:
        return TranscriptEntry(t=t, channel=Channel.WORKER, direction=MessageDirection.REQUEST,
                               rpc="CompleteOrchestratorTask", summary=f"no answer for {instance_id} in time",
                               status="DEADLINE_EXCEEDED")
    actions = ", ".join(f"{kind}#{body.get('id', '?')}" for a in answer.get("actions", ()) for kind, body in a.items())
    status = answer.get("custom_status")
    extra = f" status={short(str(status))}" if status is not None else ""
    return TranscriptEntry(t=t, channel=Channel.WORKER, direction=MessageDirection.REQUEST,
                           rpc="CompleteOrchestratorTask", summary=f"CompleteOrchestratorTask {instance_id} [{actions}]{extra}",
                           message=truncate(dict(answer)))


def _recorded_actions(events: Any) -> dict[int, tuple[str, str]]:
    """id -> (action kind, name) of the actions the turn's history holds, in the vector's numbering (the
    answer is compared in it, after to_reference). Left out: the completion (the instance is over) and
    optional timers, whose id a changed program's action may take (HIST-EVENTID-001)."""
    out: dict[int, tuple[str, str]] = {}
    for ev in events:
        made_by = event_kind(ev).made_by
        if made_by is None or made_by is ActionKind.COMPLETE_WORKFLOW or is_optional_timer(ev):
            continue
        out[ev.eventId] = (made_by.value, str(event_dict(ev).get("name", "")))
    return out

def _has_wait(node: Any) -> bool:
    """Whether program documents hold a wait_event step anywhere."""
    if isinstance(node, Mapping):
        return "wait_event" in node or any(_has_wait(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_wait(v) for v in node)
    return False
