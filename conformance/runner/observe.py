"""What a flow scenario observed once its steps ran: states, histories, transcript, the engine's incidents, and
the replays of the worker's own histories."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

from taskhub_wire import pb
from taskhub_core.incidents import Incident

from conformance.checks import FlowObservation
from conformance.checks.replay import REPLAYING
from conformance.scenario.model import Scenario
from conformance.scenario.wire import event_dict
from conformance.targets.base import Replayer, WorkerStart
from conformance.runner.harness import Harness, Run, instance_history, instance_state

def observe(run: Run, h: Harness, *, replay: Replayer | None) -> FlowObservation:
    ids = dict(run.instances)
    for key in run.scenario.expect:
        if key not in ids:
            ids[key] = str(run.subst(key))
    states: dict[str, Any] = {}
    raw: dict[str, list[Any]] = {}
    for iid in dict.fromkeys(ids.values()):
        client = h.client_for(iid)
        state = instance_state(client, iid)
        if state is not None:
            states[iid] = state
            raw[iid] = instance_history(client, iid)
    ledger = [json.loads(line) for line in h.ledger.read_text(encoding="utf-8").splitlines() if line.strip()]
    zombies = h.zombies + (getattr(h.worker, "zombies_sent", lambda: [])() if h.worker is not None else [])
    counters = h.sidecar.counters() if hasattr(h.sidecar, "counters") else {}
    incidents = incidents_of(h)
    # The history corpus (conformance/versions/corpus.py): only with $CONFORMANCE_RECORD_HISTORIES set.
    from conformance.versions.corpus import record_if_asked

    redeployed = redeploys(run.scenario)
    record_if_asked(scenario_id=run.scenario.id, kind="redeployed" if redeployed else run.scenario.kind.value,
                    programs_doc=run.scenario.programs_doc,
                    iids=raw, fetch=lambda iid: (h.client_for(iid).call(
                        "GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True),
                        timeout=10).workflowState, raw[iid]))
    return FlowObservation(scenario=run.scenario, instances=run.instances, keys=ids, states=states, replay=replay,
                    histories={k: [event_dict(e, with_router=bool(run.scenario.apps)) for e in v]
                               for k, v in raw.items()}, raw_histories=raw,
                    ledger=ledger, counters=counters, incidents=incidents, zombie_results=zombies,
                    reproduce=run.reproduce,
                    engine=run.pair.sidecar.kind)

def incidents_of(h: Harness) -> dict[str, tuple[Incident, ...]] | None:
    """What the engine refused, redelivered or dropped, per instance, read like its counters (None: this
    engine keeps no such record)."""
    read = getattr(h.sidecar, "incidents", None)
    return read() if read is not None else None

def redeploys(scenario: Scenario) -> bool:
    """Whether a step of the scenario runs other programs or versions than it started with."""
    return any(getattr(st.args, "programs", None) or getattr(st.args, "versions", None) for st in scenario.steps)


class _ReplayWorker:
    """A vector sidecar and a worker under test on it, started on a thread of its own (`begin`), so that a
    worker slow to start (a JVM) starts while the scenario's engine and first worker do."""

    def __init__(self, run: Run, bundle: Any) -> None:
        self.run, self.bundle = run, bundle
        self.sidecar: Any = None
        self.handle: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def begin(self) -> None:
        from conformance.reporting.logs import acting_for, thread_scenario

        scenario = thread_scenario()  # the worker's output goes to this scenario's log, as when started here

        def start() -> None:
            with acting_for(scenario):
                self._start()

        self.thread = threading.Thread(target=start, name="replay-worker", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        from conformance.targets.reference import start_reference_sidecar

        try:
            vec_dir = self.run.work_dir / "vectors"
            vec_dir.mkdir(exist_ok=True)
            self.sidecar = start_reference_sidecar(options={}, work_dir=vec_dir)
            self.handle = self.run.pair.worker.start(WorkerStart(
                address=self.sidecar.address, bundle=self.bundle, bundle_doc=self.run.scenario.programs_doc,
                work_dir=vec_dir, ledger=vec_dir / "ledger.jsonl"))
        except BaseException as exc:  # noqa: BLE001 - raised where the replay is asked for
            self.error = exc

    def ready(self) -> Any:
        """The vector sidecar once the worker is up (started now when nobody began it)."""
        if self.thread is None:
            self._start()
        else:
            self.thread.join()
        if self.error is not None:
            raise self.error
        return self.sidecar

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.handle is not None:
            self.handle.stop()
        if self.sidecar is not None:
            self.sidecar.stop()


def replay_early(run: Run, stack: ExitStack) -> _ReplayWorker | None:
    """The replay worker started now, beside the scenario's engine, when its checks will replay turns on a
    process worker and its programs stay those it started with; None otherwise (`replayer` starts one when
    first asked)."""
    sc = run.scenario
    if run.pair.worker.replayer is not None or not REPLAYING & set(sc.checks) or redeploys(sc):
        return None
    early = _ReplayWorker(run, sc.programs)
    stack.callback(early.stop)
    early.begin()
    return early


def replayer(run: Run, bundle: Any, stack: ExitStack, *, early: _ReplayWorker | None = None) -> Replayer | None:
    """Replays turns on a fresh worker: in-process for the reference worker, else through a vector sidecar
    (`early`'s, when `replay_early` started it)."""
    worker = run.pair.worker
    if worker.replayer is not None:
        return worker.replayer(bundle)
    from conformance.targets.reference import answer_dict

    holder: list[_ReplayWorker] = [early] if early is not None else []

    def replay(iid: str, past: Sequence[Any], new: Sequence[Any]) -> dict[str, Any] | None:
        if not holder:
            holder.append(_ReplayWorker(run, bundle))
            stack.callback(holder[0].stop)
        resp = holder[0].ready().engine.inject_turn(instance_id=iid, past=past, new=new, timeout=30)
        return None if resp is None else answer_dict(resp)

    return replay
