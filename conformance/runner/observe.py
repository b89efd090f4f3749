"""What a flow scenario observed once its steps ran: states, histories, transcript, the engine's incidents, and
the replays of the worker's own histories."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

from taskhub_wire import pb
from taskhub_core.incidents import Incident

from conformance.checks import FlowObservation
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

    redeployed = any(getattr(st.args, "programs", None) or getattr(st.args, "versions", None) for st in run.scenario.steps)
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

def replayer(run: Run, bundle: Any, stack: ExitStack) -> Replayer | None:
    """Replays turns on a fresh worker: in-process for the reference worker, else through a vector sidecar."""
    worker = run.pair.worker
    if worker.replayer is not None:
        return worker.replayer(bundle)
    from conformance.targets.reference import answer_dict, start_reference_sidecar

    holder: dict[str, Any] = {}

    def replay(iid: str, past: Sequence[Any], new: Sequence[Any]) -> dict[str, Any] | None:
        if "sidecar" not in holder:
            vec_dir = run.work_dir / "vectors"
            vec_dir.mkdir(exist_ok=True)
            sidecar = start_reference_sidecar(options={}, work_dir=vec_dir)
            stack.callback(sidecar.stop)
            holder["sidecar"] = sidecar
            handle = worker.start(WorkerStart(address=sidecar.address, bundle=bundle,
                                              bundle_doc=run.scenario.programs_doc, work_dir=vec_dir,
                                              ledger=vec_dir / "ledger.jsonl"))
            stack.callback(handle.stop)
        resp = holder["sidecar"].engine.inject_turn(instance_id=iid, past=past, new=new, timeout=30)
        return None if resp is None else answer_dict(resp)

    return replay
