"""History rules (docs/engine-rules.md §2 and §6), checked on every history a scenario produces.

Each rule is a registered function over one committed history that yields structured breaks
(`Break`: the rule, the requirement it belongs to, the event index); nothing is parsed back out of
text. A rule the engines legitimately apply differently takes the engine's family into account
(`Family`): the standalone sidecar ([SA]) stamps TimerFired with its creation time (R2.6) and lets
a timeout timer fire after its event (R6.3), as does an engine started with the engine setting
`late_timeout_timers` (conformance/scenario/engine.py); R6.4 and R6.5 are the Dapr engines' only.
What a history cannot show of a rule is said next to the rule in docs/engine-rules.md.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from taskhub_wire.kinds import EventKind

from conformance.checks import Observed, check, fail
from conformance.verdict import Break

Event = dict[str, Any]  # conformance.scenario.wire.event_dict: {kind, eventId, timestamp, ...fields}
K = EventKind

# From the one kind table (taskhub_wire/kinds.py): events an answer's action makes, keyed by the id
# space their eventId is unique in (a completion is checked on its own, once and last) ...
ACTION_EVENTS = {k.value: k.value for k in EventKind if k.made_by is not None and k is not K.EXECUTION_COMPLETED}
# ... the results, with the event that opened their operation ...
RESOLUTIONS = {k.value: k.resolves.opened_by.value for k in EventKind if k.resolves is not None}
# ... and the operations whose ids share one sequence (R3.14): a TaskScheduled and a TimerCreated collide.
_OPENING = frozenset(set(RESOLUTIONS.values()))
# Events an answer makes (R2.1: after the turn's delivered events); ExecutionStalled is neither.
MADE = frozenset(k.value for k in EventKind if k.made_by is not None)
_NEUTRAL = frozenset({K.WORKFLOW_STARTED.value, K.EXECUTION_STALLED.value})
_SENTINEL = "9999-12-31T23:59:59.999999999Z"
_CONTINUED = "ORCHESTRATION_STATUS_CONTINUED_AS_NEW"


class Family(enum.Enum):
    DAPR = "dapr"  # daprd and the reference engine
    STANDALONE = "standalone"  # the durabletask-go sidecar ([SA])


def family_of(engine_kind: str) -> Family:
    return Family.STANDALONE if engine_kind == "durabletask-go" else Family.DAPR


@dataclass(frozen=True)
class _History:
    events: Sequence[Event]
    family: Family
    lead: int  # ExecutionStalled events before the first committed turn (§7)
    copied: int = 0  # a rerun copy's events before its target are the source's, moved (R8.3)
    late_timeouts: bool = False  # the engine was asked to deliver a won wait's TimerFired late (R6.3)

    def turns(self) -> Iterator[tuple[int, list[int]]]:
        """(index of each WorkflowStarted, the indices of its turn's other events)."""
        ws: int | None = None
        members: list[int] = []
        for i in range(self.lead, len(self.events)):
            if self.events[i]["kind"] == "WorkflowStarted":
                if ws is not None:
                    yield ws, members
                ws, members = i, []
            elif ws is not None:
                members.append(i)
        if ws is not None:
            yield ws, members


def instant(text: Any) -> int | None:
    """Nanoseconds of an RFC 3339 time (fractions have varying digits, so text does not sort)."""
    if not isinstance(text, str):
        return None
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp()
    try:
        stamp.FromJsonString(text)
    except ValueError:
        return None
    return stamp.seconds * 1_000_000_000 + stamp.nanos


def _ref(event: Event) -> int:
    return int(event.get("timerId", event.get("taskScheduledId", 0)))


def _optional_timer(event: Event) -> bool:
    """R3.14 (a): the 9999-12-31 timer of an indefinite wait, whose id changed code may take over."""
    return (event["kind"] == "TimerCreated" and event.get("fireAt") == _SENTINEL
            and ("externalEvent" in event or "createTimer" not in event))


Rule = Callable[[_History], Iterator[Break]]
RULES: dict[str, tuple[str, Rule]] = {}  # rule id -> (requirement, rule)


def rule(rule_id: str, requirement: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        if rule_id in RULES:
            raise ValueError(f"history rule {rule_id} is registered twice")
        RULES[rule_id] = (requirement, fn)
        return fn

    return register


def _break(rule_id: str, index: int, text: str) -> Break:
    return Break(rule=rule_id, requirement=RULES[rule_id][0], index=index, text=f"{text} ({rule_id})")


# ------------------------------------------------------------------------------------------- §2


@rule("R2.1", "HIST-LAYOUT-001")
def turn_layout(h: _History) -> Iterator[Break]:
    """Every turn starts with WorkflowStarted; a history with [WorkflowStarted, ExecutionStarted];
    a turn's delivered events come before the events its answer made."""
    ev = h.events
    if h.lead < len(ev) and ev[h.lead]["kind"] != "WorkflowStarted":
        yield _break("R2.1", h.lead, f"the history starts with {ev[h.lead]['kind']}; every turn starts with "
                                     "WorkflowStarted")
    starts = [i for i, e in enumerate(ev) if e["kind"] == "ExecutionStarted"]
    if starts and starts[0] != h.lead + 1:
        yield _break("R2.1", starts[0], "ExecutionStarted is not the first turn's first delivered event")
    for i in starts[1:]:
        yield _break("R2.1", i, f"a second ExecutionStarted (the first at #{starts[0]}); one per generation")
    for _ws, members in h.turns():
        members = [i for i in members if i >= h.copied]
        made = next((i for i in members if ev[i]["kind"] in MADE), None)
        if made is None:
            continue
        for i in members:
            if i > made and ev[i]["kind"] not in MADE | _NEUTRAL:
                yield _break("R2.1", i, f"{ev[i]['kind']} follows {ev[made]['kind']} #{made} in one turn; "
                                        "delivered events come before the answer's events")


@rule("R2.2", "HIST-LAYOUT-001")
def no_workflow_completed(h: _History) -> Iterator[Break]:
    for i, e in enumerate(h.events):
        if e["kind"] in ("WorkflowCompleted", "OrchestratorCompleted"):
            yield _break("R2.2", i, f"a {e['kind']} event; the Dapr engines never write it")


@rule("R2.4", "HIST-EVENTID-001")
def event_ids(h: _History) -> Iterator[Break]:
    """Action-made events carry their action's id, unique in one sequence; all others carry -1."""
    holders: dict[int, int] = {}
    for i, e in enumerate(h.events):
        kind, eid = e["kind"], e.get("eventId", -1)
        if kind in _OPENING:
            held = holders.get(eid)
            if held is not None and not _optional_timer(h.events[held]):
                yield _break("R2.4", i, f"{kind} reuses id {eid} of {h.events[held]['kind']} #{held}; "
                                        "action ids are one sequence per generation (R3.14)")
            holders[eid] = i
        elif kind not in MADE and eid != -1:
            yield _break("R2.4", i, f"{kind} has eventId {eid}; only events made from actions carry ids")


@rule("R2.5", "HIST-CORR-001")
def correlation(h: _History) -> Iterator[Break]:
    """A result names its operation's id; a task result carries the TaskScheduled's taskExecutionId;
    TimerFired repeats its TimerCreated's fireAt; no result names an operation history lacks (R2.8)."""
    opened: dict[tuple[str, int], Event] = {}
    for i, e in enumerate(h.events):
        kind = e["kind"]
        if kind in ACTION_EVENTS:
            opened[(ACTION_EVENTS[kind], e.get("eventId", -1))] = e
        if kind not in RESOLUTIONS:
            continue
        key = (RESOLUTIONS[kind], _ref(e))
        source = opened.get(key)
        if source is None:
            yield _break("R2.5", i, f"{kind} for id {key[1]} has no {key[0]} operation in this history (R2.8)")
        elif RESOLUTIONS[kind] == K.TASK_SCHEDULED.value and e.get("taskExecutionId", "") != \
                source.get("taskExecutionId", ""):
            yield Break(rule="R2.5", requirement="ACT-TEID-001", index=i,
                        text=f"{kind} taskExecutionId {e.get('taskExecutionId')!r} is not its TaskScheduled's "
                             f"{source.get('taskExecutionId')!r} (R2.5)")
        elif kind == "TimerFired" and e.get("fireAt") != source.get("fireAt") and h.family is Family.STANDALONE:
            # (On the Dapr engines such a TimerFired is a timer of an older generation: R6.4 names it.)
            yield _break("R2.5", i, f"TimerFired fireAt {e.get('fireAt')} is not its TimerCreated's "
                                    f"{source.get('fireAt')}")


@rule("R2.6", "HIST-TIME-001")
def timestamps(h: _History) -> Iterator[Break]:
    """Every event has a time; WorkflowStarted times strictly increase; an event an answer made is no
    earlier than its turn's WorkflowStarted, an event the turn delivered no later; a result is no
    earlier than the event that opened its operation; [DAPR] a TimerFired no earlier than its fireAt."""
    ev = h.events
    opened: dict[tuple[str, int], int | None] = {}
    last_ws: int | None = None
    for i, e in enumerate(ev):
        if "timestamp" not in e:
            yield _break("R2.6", i, f"{e['kind']} has no timestamp")
    for ws, members in h.turns():
        t_ws = instant(ev[ws].get("timestamp"))
        if t_ws is not None and last_ws is not None and t_ws <= last_ws:
            yield _break("R2.6", ws, f"WorkflowStarted at {ev[ws]['timestamp']} is not later than the previous "
                                     "turn's")
        last_ws = t_ws if t_ws is not None else last_ws
        for i in members:
            e, t = ev[i], instant(ev[i].get("timestamp"))
            kind = e["kind"]
            if t is None or t_ws is None or kind in _NEUTRAL or i < h.copied:
                pass
            elif kind in MADE and t < t_ws:
                yield _break("R2.6", i, f"{kind}, made by the turn's answer, is stamped before the turn's "
                                        f"WorkflowStarted #{ws}")
            elif kind not in MADE and kind != "ExecutionStarted" and t > t_ws:
                # (A continue-as-new generation's ExecutionStarted is made with its WorkflowStarted,
                # after it: durabletask-go applier.go:88-117.)
                yield _break("R2.6", i, f"{kind}, delivered in the turn of #{ws}, is stamped after that turn "
                                        "began")
            if kind in ACTION_EVENTS:
                opened[(ACTION_EVENTS[kind], e.get("eventId", -1))] = t
            if kind in RESOLUTIONS and t is not None:
                cause = opened.get((RESOLUTIONS[kind], _ref(e)))
                if cause is not None and t < cause:
                    yield _break("R2.6", i, f"{kind} is stamped before the event that opened its operation")
                fire_at = instant(e.get("fireAt"))
                if kind == "TimerFired" and h.family is Family.DAPR and fire_at is not None and t < fire_at:
                    yield _break("R2.6", i, f"TimerFired is stamped {e.get('timestamp')}, before its fireAt "
                                            f"{e.get('fireAt')}")


@rule("R2.7", "HIST-ONCE-001")
def resolved_once(h: _History) -> Iterator[Break]:
    seen: dict[tuple[str, int], int] = {}
    completed: int | None = None
    for i, e in enumerate(h.events):
        kind = e["kind"]
        if kind in RESOLUTIONS:
            key = (RESOLUTIONS[kind], _ref(e))
            if key in seen:
                yield _break("R2.7", i, f"{kind} resolves {key[0]} {key[1]} again (first at #{seen[key]})")
            seen.setdefault(key, i)
        elif kind == "ExecutionCompleted":
            if completed is not None:
                yield _break("R2.7", i, f"a second ExecutionCompleted (the first at #{completed})")
            completed = i if completed is None else completed


@rule("R2.10", "CAN-HIST-001")
def one_generation(h: _History) -> Iterator[Break]:
    """A history holds one generation: continue-as-new replaces it with the next one and is itself
    never written (no ExecutionCompleted{CONTINUED_AS_NEW}: durabletask-go runtimestate/applier.go:83-117
    builds the new state from WorkflowStarted and ExecutionStarted). One ExecutionStarted, first in
    the first turn, is R2.1's."""
    for i, e in enumerate(h.events):
        if e["kind"] == "ExecutionCompleted" and e.get("workflowStatus") == _CONTINUED:
            yield _break("R2.10", i, "an ExecutionCompleted{CONTINUED_AS_NEW}; continue-as-new replaces the history "
                                     "and is never recorded")


@rule("R2.11", "STALL-STATE-001")
def stalls_not_repeated(h: _History) -> Iterator[Break]:
    for i in range(1, len(h.events)):
        a, b = h.events[i - 1], h.events[i]
        if a["kind"] == b["kind"] == "ExecutionStalled" and a.get("description") == b.get("description"):
            yield _break("R2.11", i, "ExecutionStalled repeats the previous stall's description")


# Events made from actions, stamped with the acting app's router (R2.13, R11.3: applier.go:132-143, 208-215,
# 227-243, 262-281, 403-416); a DetachedWorkflowInstanceCreated gets a target-only router (applier.go:361-378).
_ROUTED = frozenset({K.TASK_SCHEDULED.value, K.TIMER_CREATED.value, K.CHILD_WORKFLOW_INSTANCE_CREATED.value,
                     K.EVENT_SENT.value, K.EXECUTION_COMPLETED.value})


@rule("R2.13", "ROUTE-STAMP-001")
def routers(h: _History) -> Iterator[Break]:
    """Where the history shows routers (the harness keeps them for scenarios of several apps; R11.3):
    every event made from an action carries router.sourceAppID, one app for the whole instance; a
    TaskCompleted carries its TaskScheduled's router, and so does a TaskFailed that has one (the one
    an access policy makes has none: orchestrator/activity.go:146-162)."""
    if not any("router" in e for e in h.events):
        return
    source: tuple[str, int] | None = None
    scheduled: dict[int, Any] = {}
    for i, e in enumerate(h.events):
        kind, router = e["kind"], e.get("router")
        if i < h.copied:
            pass
        elif kind in _ROUTED and e.get("eventId", -1) >= 0:  # (a terminate's ExecutionCompleted is no action's)
            app = (router or {}).get("sourceAppID", "")
            if not app:
                yield _break("R2.13", i, f"{kind}, made from action {e.get('eventId')}, carries no router.sourceAppID")
            elif source is None:
                source = (app, i)
            elif app != source[0]:
                yield _break("R2.13", i, f"{kind} names source app {app!r}, #{source[1]} {source[0]!r}; one app "
                                         "runs an instance's actions")
        elif kind in (K.TASK_COMPLETED.value, K.TASK_FAILED.value) and _ref(e) in scheduled:
            expected = scheduled[_ref(e)]
            if (router is not None or kind == K.TASK_COMPLETED.value) and router != expected:
                yield _break("R2.13", i, f"{kind} carries router {router}, not its TaskScheduled's {expected}")
        if kind == K.TASK_SCHEDULED.value and router is not None:
            scheduled[e.get("eventId", -1)] = router


# ------------------------------------------------------------------------------------------- §6


@rule("R6.1", "TMR-FIRE-001")
def timers_not_early(h: _History) -> Iterator[Break]:
    for ws, members in h.turns():
        t_ws = instant(h.events[ws].get("timestamp"))
        for i in members:
            e = h.events[i]
            fire_at = instant(e.get("fireAt"))
            if e["kind"] == "TimerFired" and t_ws is not None and fire_at is not None and t_ws < fire_at:
                yield _break("R6.1", i, f"timer {_ref(e)} fired in a turn starting {h.events[ws].get('timestamp')}, "
                                        f"before its fireAt {e.get('fireAt')}")


@rule("R6.4", "CAN-STALE-001")
def older_generation_timers(h: _History) -> Iterator[Break]:
    """[DAPR] a timer of an older generation never fires in this one (after continue-as-new action ids
    start again, so it would answer this generation's timer of the same id): a TimerFired repeats the
    fireAt of this generation's TimerCreated. (One whose id no TimerCreated holds is never committed,
    R2.8, and is R2.5's.)"""
    if h.family is Family.STANDALONE:
        return
    created: dict[int, tuple[int, Any]] = {}
    for i, e in enumerate(h.events):
        if e["kind"] == "TimerCreated":
            created[e.get("eventId", -1)] = (i, e.get("fireAt"))
        elif e["kind"] == "TimerFired" and _ref(e) in created and e.get("fireAt") != created[_ref(e)][1]:
            at, fire_at = created[_ref(e)]
            yield _break("R6.4", i, f"TimerFired for timer {_ref(e)} is due {e.get('fireAt')}, not at its "
                                    f"TimerCreated #{at}'s {fire_at}: a timer of an older generation fired in this one")


@rule("R6.5", "EVT-RAISE-001")
def raised_once(h: _History) -> Iterator[Break]:
    """[DAPR] a raised event is queued once and recorded once: no two EventRaised share a name and a
    timestamp (RaiseEvent stamps strictly increasing times, R2.6; a redelivered one is dropped, R2.7).
    The first turn is not judged: its carried-over events are the SDK's copies, with the SDK's stamps
    (a worker may send them unstamped)."""
    if h.family is Family.STANDALONE:
        return
    first = next(iter(h.turns()), None)
    carried = set(first[1]) if first is not None else set()
    seen: dict[tuple[str, Any], int] = {}
    for i, e in enumerate(h.events):
        if e["kind"] == "EventRaised" and "timestamp" in e and i not in carried:
            key = (str(e.get("name", "")), e["timestamp"])
            if key in seen:
                yield _break("R6.5", i, f"EventRaised {key[0]!r} at {key[1]} again (first at #{seen[key]}); a "
                                        "raised event is recorded once")
            seen.setdefault(key, i)


@rule("R6.7", "EVT-SUSP-001")
def suspension_blocks_nothing(h: _History) -> Iterator[Break]:
    """The engine blocks nothing while an instance is suspended: an event raised while it was suspended
    (stamped by the call, after the ExecutionSuspended and before the ExecutionResumed) is recorded as
    it arrived, so before that ExecutionResumed, not held back until after it."""
    suspended: int | None = None  # time of the ExecutionSuspended in effect
    windows: list[tuple[int, int, int]] = []  # (suspended at, resumed at, index of the ExecutionResumed)
    for i, e in enumerate(h.events):
        t = instant(e.get("timestamp"))
        if e["kind"] == "ExecutionSuspended" and suspended is None and t is not None:
            suspended = t
        elif e["kind"] == "ExecutionResumed":
            if suspended is not None and t is not None:
                windows.append((suspended, t, i))
            suspended = None
        elif e["kind"] == "EventRaised" and t is not None:
            for since, until, resumed in windows:
                if since < t < until:
                    yield _break("R6.7", i, f"EventRaised, raised at {e['timestamp']} while the instance was "
                                            f"suspended, is recorded after ExecutionResumed #{resumed}; events are "
                                            "recorded while suspended")
                    break


@rule("R3.1", "LIFE-STATUS-001")
def nothing_after_completion(h: _History) -> Iterator[Break]:
    """A completion is final (REF; R6.2: no timer fires after it)."""
    done = next((i for i, e in enumerate(h.events) if e["kind"] == "ExecutionCompleted"), None)
    if done is not None:
        for i in range(done + 1, len(h.events)):
            yield _break("R3.1", i, f"{h.events[i]['kind']} follows ExecutionCompleted #{done}; events follow "
                                    "ExecutionCompleted")


def _timeout_name(e: Event) -> str | None:
    origin = e.get("externalEvent")
    if isinstance(origin, dict):
        return str(origin.get("name", ""))
    if "createTimer" not in e and "activityRetry" not in e and "childWorkflowRetry" not in e and e.get("name"):
        return str(e["name"])
    return None


@rule("R6.3", "TMR-TIMEOUT-001")
def timeouts_cancelled(h: _History) -> Iterator[Break]:
    """[DAPR] an EventRaised whose turn committed before a wait's timeout was due cancels the oldest
    such timer of that name: its TimerFired never comes. The commit time is the latest event the
    turn's answer made (stamped when applied); a turn that made none is not judged."""
    if h.family is Family.STANDALONE or h.late_timeouts:
        return
    pending: dict[str, list[tuple[int, int]]] = {}  # name -> [(timer id, fireAt ns)], oldest first
    cancelled: dict[int, int] = {}  # timer id -> index of the EventRaised that cancelled it
    for _ws, members in h.turns():
        made = [t for i in members if h.events[i]["kind"] in MADE
                and (t := instant(h.events[i].get("timestamp"))) is not None]
        committed = max(made) if made else None
        for i in members:
            e = h.events[i]
            if e["kind"] == "EventRaised" and committed is not None:
                timers = pending.get(str(e.get("name", "")).casefold(), [])
                due = next((t for t in timers if t[1] > committed), None)
                if due is not None:
                    timers.remove(due)
                    cancelled[due[0]] = i
            elif e["kind"] == "TimerFired" and _ref(e) in cancelled:
                yield _break("R6.3", i, f"timer {_ref(e)} fired although EventRaised #{cancelled[_ref(e)]} "
                                        "committed before it was due")
        for i in members:  # a timer made in this turn waits from the next turn on
            e = h.events[i]
            if e["kind"] == "TimerCreated" and (name := _timeout_name(e)) is not None:
                pending.setdefault(name.casefold(), []).append((e.get("eventId", -1), instant(e.get("fireAt")) or 0))


@rule("R6.8", "LIFE-TERM-001")
def termination_output(h: _History) -> Iterator[Break]:
    """A terminated instance ends ExecutionCompleted{TERMINATED} with the request's output, no failure."""
    terminated: Event | None = None
    for i, e in enumerate(h.events):
        if e["kind"] == "ExecutionTerminated":
            terminated = terminated or e
        elif e["kind"] == "ExecutionCompleted" and e.get("workflowStatus") == "ORCHESTRATION_STATUS_TERMINATED":
            if "failureDetails" in e:
                yield _break("R6.8", i, "a terminated instance's ExecutionCompleted carries failureDetails")
            if terminated is not None and e.get("result") != terminated.get("input"):
                yield _break("R6.8", i, f"ExecutionCompleted result {e.get('result')!r} is not the termination's "
                                        f"output {terminated.get('input')!r}")


# ------------------------------------------------------------------------------------------- entry points


def breaks(history: Sequence[Event], *, family: Family = Family.DAPR, late_timeouts: bool = False) -> list[Break]:
    """Every break of every rule in one committed history, in event order (`late_timeouts`: the
    engine keeps a wait's timeout timer after its event, so R6.3 does not apply)."""
    lead = 0
    while lead < len(history) and history[lead]["kind"] == "ExecutionStalled":
        lead += 1
    target = next((i for i, e in enumerate(history) if "rerunParentInstanceInfo" in e), 0)
    h = _History(events=history, family=family, lead=lead, copied=target, late_timeouts=late_timeouts)
    out = [b for _req, fn in RULES.values() for b in fn(h)]
    return sorted(out, key=lambda b: (b.index if b.index is not None else -1, b.rule))


def invariants(history: Sequence[Event], *, family: Family = Family.DAPR) -> list[str]:
    """The breaks as lines ("event #i: text (rule)"), for people."""
    return [f"event #{b.index}: {b.text}" for b in breaks(history, family=family)]


@check("history_well_formed", always=True)
def history_well_formed(obs: Observed) -> None:
    """The engine's history rules; each break names its rule, requirement and event."""
    family = family_of(obs.engine)
    late = obs.scenario.engine.late_timeout_timers is True
    out = [b.mismatch(instance=iid) for iid, history in obs.histories.items()
           for b in breaks(history, family=family, late_timeouts=late)]
    fail(obs, "history_well_formed", out)
