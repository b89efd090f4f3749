"""The reference sidecar and worker as targets (in-process: fast, and the engine is inspectable).

This is the only module of the harness that imports fake_sidecar and fake_worker (docs/design.md §2); the
fuzzer (its engine model and schedules), the replay session and the loader's adversary check take the
reference engine, executor and rule parser from here too (the re-exports below).
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_sidecar.engine import Engine, errors as engine_errors
from fake_sidecar.engine.changes import ChangeSignal
from fake_sidecar.engine.clock import VirtualClock
from fake_sidecar.engine.config import PolicyRule
from fake_sidecar.engine.errors import FailedPrecondition
from fake_sidecar.engine.policy import REFERENCE_POLICY, EnginePolicy
from fake_sidecar.engine.store import MemoryStore
from fake_sidecar.server import SidecarServer
from fake_worker.activities import ActivityRunner
from fake_worker.adversary import Adversary, AdversaryError, parse_rules
from fake_worker.client import Worker, WorkerOptions
from fake_worker.replay import TurnResult, execute
from fake_worker.replay.executor import OPTIONAL_TIMER_FIRE_AT, trace as trace_program  # noqa: F401 (conformance/arrival)
from fake_worker.replay.simulate import run_pure_activity
from taskhub_core.incidents import Incident
from taskhub_programs import Bundle
from taskhub_wire.limits import DEFAULT_MAX_MESSAGE_BYTES

from conformance import stopping
from conformance.reporting.logs import adopt
from conformance.scenario.engine import Retention, settings_of
from conformance.scenario.wire import action_dict
from conformance.targets.base import Replayer, WorkerStart


def hold_port(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:`port` without listening. Bound exclusively (no SO_REUSEADDR) no other
    socket can take the port; where the closed server's connections still hold it (TIME_WAIT), only
    with SO_REUSEADDR, which keeps it from port 0 but not from an explicit bind."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            sock.close()
            raise
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    return sock


class ReferenceSidecar:
    """An in-process reference sidecar on a SQLite file, restartable on the same port."""

    def __init__(self, *, options: Mapping[str, Any], work_dir: Path, engine_class: type[Engine] = Engine,
                 policy: EnginePolicy = REFERENCE_POLICY) -> None:
        self.db = str(work_dir / "reference.db")
        self.options = dict(options)
        self.engine_class = engine_class
        self.policy = policy
        self._app_ports: dict[str, int] = {}  # a restart keeps every app's address
        self._down = False  # stopped or killed: a restart first stops a running server, as daprd's does
        self._placeholders: dict[int, socket.socket] = {}  # the ports of a sidecar that is down, kept
        self._clock_held = False  # kept across restarts (hold_clock)
        # A virtual clock goes on across restarts: its store holds timers in the clock's time.
        # "engine-time" (the harness's default on the in-process pair): virtual, but the clock jumps only
        # for `pass_time` (a sleep step, a sleeping activity) and, during the harness's other waits, only
        # while nothing changed since the wait's last read (`allow_jump`): a free jump there to a far timer
        # (a one-hour retention) would outrun the read that ends the wait, which real time never does.
        self._clock = VirtualClock() if self.options.get("clock") in ("virtual", "engine-time") else "real"
        self._only_passing = self.options.get("clock") == "engine-time"
        self.server = self._start(port=0)
        self._app_ports = {app: int(addr.rsplit(":", 1)[1]) for app, addr in self.server.app_addresses.items()}
        self.address = self.server.address

    def _start(self, *, port: int) -> SidecarServer:
        settings = settings_of(self.options)
        body = settings.max_body_size  # as daprd's --max-body-size: the transport limit and the stall threshold
        server = SidecarServer.start(port=port, db=self.db, api_token=self.options.get("api_token"),
                                     activity_lease=self.options.get("activity_lease"),
                                     max_payload=body or self.options.get("max_payload"),
                                     **({"max_message_bytes": max(body, DEFAULT_MAX_MESSAGE_BYTES)} if body else {}),
                                     clock=self._clock, engine_class=self.engine_class,
                                     policy=self.policy,
                                     task_execution_id=self.options.get("task_execution_id", "passthrough"),
                                     max_concurrent_workflows=settings.max_concurrent_workflows,
                                     max_concurrent_activities=settings.max_concurrent_activities,
                                     retention_s=_retention_seconds(settings.retention),
                                     stateful_history=settings.stateful_history is not False,
                                     late_timeout_timers=settings.late_timeout_timers is True,
                                     apps=tuple(self.options.get("apps") or ()),
                                     app_ports=self._app_ports,
                                     access_policies=_policies(self.options.get("access_policies") or {}),
                                     policy_scopes=tuple((app, tuple(scopes)) for app, scopes in
                                                         (self.options.get("policy_scopes") or {}).items()),
                                     namespaces=tuple((self.options.get("app_namespaces") or {}).items()),
                                     app_max_payload=tuple((self.options.get("app_body_limits") or {}).items()))
        adopt(server, server.engine)  # their log lines belong to the scenario starting them
        if self._clock_held:
            server.engine.hold_clock(True)
        if self._only_passing:
            with server.engine.lock:
                server.engine.ticker.only_passing = True
        return server

    @property
    def engine(self) -> Engine:
        return self.server.engine

    @property
    def app_addresses(self) -> dict[str, str]:
        """App id -> address, when the scenario declares several apps (one listening address each, R11.1)."""
        return self.server.app_addresses

    def stop(self) -> None:
        self.server.stop(grace=0.5)
        self._down = True
        self._release_ports()  # the end of the scenario: a killed sidecar's ports go back

    def kill(self, *, app: str | None = None) -> None:
        # In-process there is no kill -9; everything the engine acknowledged is already committed,
        # and in-memory state is dropped, which is what a crash does (tests/sidecar/test_durability.py
        # kills a real process). One process hosts every app (R11.1 REF): `app` stops them all.
        self.server.stop(grace=0)
        self._down = True
        self._hold_ports()

    def _hold_ports(self) -> None:
        """Keep the ports of a sidecar that is down from other servers of this machine until it restarts:
        port 0 handed the just-freed port to another scenario's sidecar once, and this scenario's worker
        reconnected to it. A socket bound but not listening refuses connections as a sidecar that is down."""
        for port in (self.server.port, *self._app_ports.values()):
            if port not in self._placeholders:
                self._placeholders[port] = hold_port(port)

    def _release_ports(self) -> None:
        for sock in self._placeholders.values():
            sock.close()
        self._placeholders.clear()

    def restart(self, *, app: str | None = None) -> None:
        if not self._down:
            self.server.stop(grace=0.5)
        self._release_ports()
        self.server = self._start(port=self.server.port)
        self._down = False
        self.address = self.server.address

    def counters(self) -> dict[str, int]:
        return dict(vars(self.engine.counters))

    def hold_clock(self, held: bool) -> None:
        """A virtual clock jumps to the next timer only while the harness waits (fake_sidecar/engine/ticker.py)."""
        self._clock_held = held
        self.engine.hold_clock(held)

    def pass_time(self, seconds: float) -> bool:
        """A `sleep` step in engine time, on a virtual clock (False on a real one: the caller sleeps): real
        time while the engine has work in flight, a jump once it is idle (fake_sidecar/engine/ticker.py).
        While the sidecar is down (killed, or killed meanwhile) what is left passes in real time: the
        worker's reconnect back-off runs on it."""
        if not isinstance(self._clock, VirtualClock):
            return False
        left_ns = int(seconds * 1e9) if self._down else self.engine.pass_time(seconds, stop=stopping.stopping)
        stopping.check()
        if left_ns > 0:
            stopping.sleep(left_ns / 1e9)
        return True

    def sleep_in_flight(self, seconds: float) -> None:
        """An activity's sleep, on the in-process pair: engine time as `pass_time`, the activity counted as
        asleep, so the clock may jump while everything in flight sleeps this way (and on a real clock,
        or for what is left after a restart meanwhile, real time)."""
        if not isinstance(self._clock, VirtualClock) or self._down:
            time.sleep(seconds)
            return
        left_ns = self.engine.pass_time(seconds, stop=stopping.stopping, asleep=True)
        if left_ns > 0:
            time.sleep(left_ns / 1e9)

    def allow_jump(self, signal: ChangeSignal, seq: int) -> None:
        """A harness's wait read the state at change `seq` and it was not yet what it waits for: on a virtual
        clock, engine time may jump on while the engine is idle and nothing changed (Engine.allow_jump);
        a sidecar that is down lets real time pass."""
        if isinstance(self._clock, VirtualClock) and not self._down:
            self.engine.allow_jump(signal, seq)

    def changes(self) -> ChangeSignal:
        """The running engine's change counter: the harness's waits block on it between reads."""
        return self.server.engine.table.changes

    def incidents(self) -> dict[str, tuple[Incident, ...]]:
        """What the engine refused, redelivered or dropped, per instance (taskhub_core.incidents)."""
        return self.engine.incidents.snapshot()


def _retention_seconds(retention: Retention | None) -> dict[str, float]:
    """The engine's retention keys (its final statuses, ANY for the rest) from the scenario's setting."""
    if retention is None:
        return {}
    pairs = (("ANY", retention.any_terminal), ("COMPLETED", retention.completed), ("FAILED", retention.failed),
             ("TERMINATED", retention.terminated))
    return {status: seconds for status, seconds in pairs if seconds is not None}


def _policies(raw: Mapping[str, Any]) -> tuple[tuple[str, tuple[PolicyRule, ...]], ...]:
    """The scenario's access policies (conformance.scenario.model.AccessRule) as the engine's rules."""
    return tuple((app, tuple(PolicyRule(callers=frozenset(r.callers), workflows=tuple(r.workflows),
                                        activities=tuple(r.activities)) for r in rules))
                 for app, rules in raw.items())


def start_reference_sidecar(*, options: Mapping[str, Any], work_dir: Path, engine_class: type[Engine] = Engine,
                            policy: EnginePolicy = REFERENCE_POLICY) -> ReferenceSidecar:
    return ReferenceSidecar(options=options, work_dir=work_dir, engine_class=engine_class, policy=policy)


@dataclass
class ReferenceWorkerHandle:
    worker: Worker
    thread: threading.Thread

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(10)

    def zombies_sent(self) -> list[str]:
        return list(self.worker.adversary.zombies_sent)


def start_reference_worker(spec: WorkerStart, *, worker_class: type[Worker] = Worker) -> ReferenceWorkerHandle:
    worker = worker_class(bundle=spec.bundle,
                          options=WorkerOptions(sidecar=spec.address, api_token=spec.api_token, connect_timeout=15,
                                                stateful_history=spec.stateful_history,
                                                history_cache_instances=spec.history_cache_instances,
                                                **({"max_message_bytes": max(spec.max_message_bytes,
                                                                             DEFAULT_MAX_MESSAGE_BYTES)}
                                                   if spec.max_message_bytes else {})),
                          activities=ActivityRunner(ledger=str(spec.ledger), **({"sleep": spec.sleep} if spec.sleep else {})),
                          adversary=Adversary(rules=parse_rules(list(spec.adversary))) if spec.adversary else Adversary())
    adopt(worker)
    thread = threading.Thread(target=worker.run, name="reference-worker", daemon=True)
    thread.start()
    if not worker.connected_once.wait(15):
        worker.stop()
        raise RuntimeError(f"the reference worker did not connect to {spec.address} within 15s")
    return ReferenceWorkerHandle(worker=worker, thread=thread)


def reference_replayer(bundle: Bundle) -> Replayer:
    """A fresh reference worker for every turn: the pure executor."""

    def replay(instance_id: str, past: Sequence[Any], new: Sequence[Any]) -> dict[str, Any]:
        result = execute(bundle, instance_id=instance_id, past=past, new=new)
        return answer_dict(result.response(instance_id=instance_id, completion_token=""))

    return replay


def answer_dict(resp: Any) -> dict[str, Any]:
    """A WorkflowResponse as plain data for comparisons."""
    return {"actions": [action_dict(a) for a in resp.actions],
            "custom_status": resp.customStatus.value if resp.HasField("customStatus") else None,
            "version": ({**({"name": resp.version.name} if resp.version.HasField("name") else {}),
                         "patches": list(resp.version.patches)} if resp.HasField("version") else None)}
