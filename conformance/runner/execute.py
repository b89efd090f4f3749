"""Run one scenario on one target pair and return its ScenarioFinished event.

Order: start the sidecar, the fault proxy in front of it (the worker talks only
to the proxy, so every worker message is in the transcript), then the worker;
run the starts and steps with the harness's own client; wait for the expected
states; observe; tear everything down; run the checks.
"""

from __future__ import annotations

import functools
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc

from taskhub_core.incidents import Incident

from conformance.checks import ALWAYS, FlowObservation, Observation, run_check
from conformance.events import Outcome, ScenarioFinished, TranscriptEntry
from conformance.failures import TargetMisbehaved, failures_of, render, reproduce_line
from conformance.scenario.model import Direction, Scenario, ScenarioKind
from conformance.targets.base import CannotExpress, Gap, Pair
from conformance.targets.probe import lacking
from conformance.failure_context import engine_incidents
from conformance.attribution import Cause, judge, root_causes
from conformance.retry_causes import unretried
from conformance.stale_timer_causes import stale_timeouts
from conformance.verdict import Level
from conformance.runner.harness import Harness, HarnessError, Run, do_start
from conformance.runner.observe import incidents_of, observe, replay_early, replayer
from conformance.runner.step_handlers import do_step, final_wait
from conformance.runner.vector import run_vector

_PARSING = threading.Lock()

def _catalogue() -> tuple[Any, ...]:
    """The shipped catalogue, parsed once per process: the first scenarios ask for it from several threads at
    once, and `functools.cache` alone would let each of them parse it."""
    with _PARSING:
        return _parsed_catalogue()

@functools.cache
def _parsed_catalogue() -> tuple[Any, ...]:
    from conformance.reporting.catalogue import load_catalogue

    return tuple(load_catalogue())

@functools.cache
def requirement_levels() -> Mapping[str, str]:
    """Requirement id -> catalogue level, from the shipped catalogue."""
    return {r.id: r.level for r in _catalogue()}

@functools.cache
def spared_requirements(direction: Direction) -> frozenset[str]:
    """The catalogue's requirements of the side a run in `direction` does not test (none where both sides are
    tested, or both are the reference's)."""
    other = {Direction.WORKER: "engine", Direction.ENGINE: "worker"}.get(direction)
    return frozenset(r.id for r in _catalogue() if r.applies_to == other)

@functools.cache
def requirement_sources() -> Mapping[str, str]:
    return {r.id: r.source for r in _catalogue()}

def run_scenario(scenario: Scenario, pair: Pair, *, work_root: Path | None = None, reproduce: str = "",
                 checks_only: Sequence[str] = (), capture: Callable[..., None] | None = None) -> ScenarioFinished:
    """Run `scenario` on `pair`; never raises for target misbehaviour (that is the outcome). `capture`,
    if given, is called once with what a flow scenario saw (`conformance engines-diff`): instances,
    observed (histories), calls (every client call with its answer) and transcript (the proxy's)."""
    began = time.monotonic()
    if pair.sidecar.engine.asked():  # the run's --engine-setting, under the scenario's own engine:
        scenario = replace(scenario, engine=scenario.engine.over(pair.sidecar.engine))
    missing = sorted(set(scenario.requires) - pair.capabilities)
    base = dict(scenario=scenario.id, pair=pair.label, sidecar=pair.sidecar.name, worker=pair.worker.name,
                requirements=scenario.requirements, title=scenario.title, reproduce=reproduce, source=scenario.source,
                started_at=time.time())
    unset = [s for s in scenario.engine.needed() if s.capability not in pair.sidecar.capabilities]
    if unset:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=0.0,
                                gap_reason=f"sidecar {pair.sidecar.name} cannot be started with engine setting"
                                           f"{'s' if len(unset) > 1 else ''} {', '.join(s.value for s in unset)} "
                                           f"(capabilit{'ies' if len(unset) > 1 else 'y'} "
                                           f"{', '.join(s.capability for s in unset)})", **base)
    if missing:  # a probed release's own absences say which release lacks what (conformance/targets/probe.py)
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=0.0,
                                gap_reason=lacking(missing, pair.worker.probed), **base)
    tmp = tempfile.mkdtemp(prefix="conformance-", dir=work_root)
    run = Run(scenario=scenario, pair=pair, work_dir=Path(tmp), reproduce=reproduce)
    transcript: list[TranscriptEntry] = []
    logs: list[str] = []  # a process sidecar's own logs, named in a failure's message
    failures: list[TargetMisbehaved] = []
    incidents: dict[str, tuple[Incident, ...]] | None = None  # the engine's record (reference sidecar only)
    error: str | None = None
    cannot: str | None = None
    obs = None
    with ExitStack() as stack:
        h: Harness | None = None
        try:
            if scenario.kind is ScenarioKind.VECTOR:
                obs = run_vector(run, stack, transcript=transcript)
            else:
                early = replay_early(run, stack)  # its worker starts while the engine and first worker do
                h = Harness(run, stack)
                for spec in scenario.starts:
                    do_start(run, h, spec)
                for step in scenario.steps:
                    do_step(run, h, step)
                final_wait(run, h)
                obs = observe(run, h, replay=replayer(run, h.bundle, stack, early=early))
            names = list(ALWAYS) + [c for c in scenario.checks if c not in ALWAYS]
            if scenario.kind is ScenarioKind.VECTOR:
                names = ["vector"] + [c for c in scenario.checks if c != "vector"]
            if checks_only:
                names = [n for n in names if n in checks_only]
            for name in names:
                try:
                    run_check(name, obs)
                except TargetMisbehaved as exc:
                    failures.append(exc)
        except TargetMisbehaved as exc:  # a step's own expectation (conformance.failures)
            failures.append(exc)
        except CannotExpress as exc:
            cannot = str(exc)
        except HarnessError as exc:  # said in full by whoever raised it: no traceback for the user to read
            error = f"{type(exc).__name__}: {exc}"
        except grpc.RpcError as exc:  # a call of the harness's own that no step expected to fail
            error = unanswered(exc, h, sidecar=pair.sidecar.name)
        except Exception as exc:  # noqa: BLE001 - the harness must report, not crash
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        finally:
            if h is not None:
                transcript = sorted([e for c in h.clients.values() for e in c.transcript]
                                    + [e for p in h.proxies.values() for e in p.transcript()], key=lambda e: e.t)
                logs = [str(p) for p in getattr(h.sidecar, "log_paths", ())]
                incidents = incidents_of(h)
                if capture is not None:
                    capture(instances=dict(run.instances), observed=obs, calls=list(h.client.calls),
                            transcript=list(h.proxy.transcript()))
    duration = time.monotonic() - began
    gap = pair.gap_for(scenario.id, scenario.requirements)
    if cannot is not None:
        return ScenarioFinished(outcome=Outcome.NOT_APPLICABLE, duration_s=duration, gap_reason=cannot,
                                transcript=tuple(transcript), **base)
    log_note = "".join(f"\nsidecar log: {p}" for p in logs)
    if error is not None or failures:  # what an SDK author needs beside the mismatches (conformance/failure_context.py)
        from conformance.failure_context import failure_context

        log_note += failure_context(scenario, worker=pair.worker.name, work_dir=run.work_dir, observed=obs,
                                    provenance=pair.worker.provenance,
                                    engine=engine_incidents(incidents, sidecar=pair.sidecar.name, logs=logs,
                                                            instances=_instances_of(run, obs))
                                    if scenario.kind is not ScenarioKind.VECTOR else "")
    if error is not None:
        return ScenarioFinished(outcome=Outcome.ERROR, duration_s=duration, transcript=tuple(transcript),
                                message=f"{error}{log_note}\n{reproduce_line(reproduce)}", **base)
    causes = {}
    if failures and isinstance(obs, FlowObservation):  # root causes the histories show; a retry not made first
        # A stale timeout is the worker's cause only where the scenario has the engine deliver it (R6.3):
        # elsewhere the stale TimerFired is the engine's doing (TMR-TIMEOUT-001), not the worker's.
        stale = stale_timeouts(obs.raw_histories) if scenario.engine.late_timeout_timers is True else {}
        causes = {**stale, **unretried(scenario.programs, obs.raw_histories)}
    return _verdict(scenario, failures, gap, duration=duration, transcript=tuple(transcript),
                    reproduce=reproduce, base=base, note=log_note, incidents=incidents or {},
                    spared=spared_requirements(pair.direction), causes=causes)

def unanswered(exc: grpc.RpcError, h: Harness | None, *, sidecar: str) -> str:
    """One line for a harness call that failed where no step expected it: which call, how, and what to do."""
    calls = [c for client in (h.clients.values() if h is not None else ()) for c in client.calls if c[4]]
    what = "a call"
    if calls:
        _, rpc, request, _, _ = max(calls, key=lambda c: c[0])
        iid = getattr(request, "instanceId", "")
        what = f"{rpc}" + (f" of instance {iid}" if iid else "")
    code = exc.code()
    # A deadline or a lost connection is an engine too slow or stuck; any other code is an error the engine
    # itself reported (daprd once: an inbox key "missing from state store", under load), not a wait.
    slow = code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
    why = "The engine was too slow or stuck" if slow else "The engine answered that call with an error of its own"
    return (f"HarnessError: the sidecar {sidecar} did not answer {what}, which the harness makes on its own (reading "
            f"the outcome or waiting for a state): {code.name}: {exc.details()}. {why} (see its log below); rerun "
            f"the scenario with the line below, and on a loaded machine with fewer --jobs.")


def _instances_of(run: Run, obs: Observation | None) -> tuple[str, ...]:
    """The instance ids a scenario started or expects (the incidents' instances are named after them)."""
    keys = obs.keys.values() if isinstance(obs, FlowObservation) else ()
    return tuple(dict.fromkeys([*run.instances.values(), *keys]))

def _verdict(scenario: Scenario, failures: Sequence[TargetMisbehaved], gap: Gap | None, *, duration: float,
             transcript: tuple[TranscriptEntry, ...], reproduce: str, base: Mapping[str, Any],
             note: str = "", incidents: Mapping[str, tuple[Incident, ...]] | None = None,
             spared: frozenset[str] = frozenset(), causes: Mapping[str, Cause] | None = None) -> ScenarioFinished:
    """The scenario's outcome from its mismatches: only a broken MUST fails (conformance.verdict); a mismatch
    whose instance's answers the engine refused is charged to what the refusal breaks (conformance.attribution)."""
    levels = requirement_levels()
    found = [(f.check, m) for f in failures for m in f.found]
    incidents = incidents or {}
    found = list(zip([c for c, _ in found], root_causes([m for _, m in found], incidents, causes=causes)))
    judged = judge([m for _, m in found], requirements=scenario.requirements, levels=levels,
                   charges=scenario.charges, spared=spared)
    known = judged.outcome is Outcome.FAILED and gap is not None
    verdicts = tuple((rid, Outcome.KNOWN_FAILURE if known and v is Outcome.FAILED else v)
                     for rid, v in judged.per_requirement)
    observations = tuple((m.field or check, m.text) for check, m in found if m.level is Level.OBSERVATION)
    data = failures_of(judged, found, reproduce=reproduce)
    kept = tuple(i for found_ in incidents.values() for i in found_)
    common = dict(duration_s=duration, transcript=transcript, verdicts=verdicts, broken=judged.broken,
                  observations=observations, failures=data, incidents=kept, **base)
    if judged.outcome is Outcome.PASSED:
        # Only a gap narrowed to named scenarios can be judged by one scenario passing.
        passed_gap = gap is not None and bool(gap.scenarios)
        return ScenarioFinished(outcome=Outcome.PASSED, gap_passed=passed_gap,
                                gap_reason=f"declared gap {gap.requirement} passed here: narrow or remove it in the "
                                           "target's declaration" if passed_gap and gap else "", **common)
    message = render(data, sources=requirement_sources(), note=note, reproduce=reproduce)
    if known:
        assert gap is not None
        return ScenarioFinished(outcome=Outcome.KNOWN_FAILURE, message=message,
                                gap_reason=f"declared gap {gap.requirement}: {gap.reason}", **common)
    if judged.outcome is Outcome.FAILED:
        return ScenarioFinished(outcome=Outcome.FAILED, message=message, **common)
    outcome = Outcome.WARNING if judged.outcome is Outcome.WARNING else Outcome.OBSERVATION
    # A declared gap that now only warns or observes excuses nothing: say so, as for a passing gap.
    stale = gap is not None and bool(gap.scenarios)
    return ScenarioFinished(outcome=outcome, message=message, gap_passed=stale,
                            gap_reason=f"declared gap {gap.requirement} is no longer a MUST failure here: narrow or "
                                       "remove it in the target's declaration" if stale and gap else "", **common)

__all__ = ["HarnessError", "run_scenario"]
