"""The Dapr runtime as an engine: placement and scheduler once per run, one daprd per scenario.

Binaries come from scripts/install-daprd.sh (linked as .tools/daprd/). Every listener is on
127.0.0.1 on a port picked free (daprd, placement and scheduler cannot bind port 0 and report it),
never a default port: 9090, 8080, 2379 and 50001 collide on shared machines. A start that loses a
picked port to another process is retried with new ports.

Each daprd gets a unique app id and its own SQLite actor state store, so scenarios never see each
other's work: daprd hands a work item to any worker connected under its app id.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml

from conformance.scenario.engine import daprd_workflow_spec, settings_of
from conformance.targets.sentry import start_sentry
from conformance.targets.dapr_processes import HOST, DaprdNotInstalledError, start_with_free_ports, wait_healthy
from conformance.targets.process import ManagedProcess, ProcessSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN_DIR = REPO_ROOT / ".tools" / "daprd"
INSTALL_SCRIPT = "scripts/install-daprd.sh"
# What a daprd target's `options` in targets.yaml may set: `mtls: true` runs sentry and mTLS
# (conformance/targets/sentry.py); `history_signing: true` turns on the WorkflowHistorySigning feature
# (pkg/config/configuration.go:66-70), which daprd refuses without mTLS (wfengine/wfengine.go:141-147).
TARGET_OPTIONS = frozenset({"mtls", "history_signing"})
# Until a worker has connected and daprd has registered the workflow actor types with placement,
# workflow calls fail with this (or time out); see wait_until_workflows_ready.
_NOT_READY = ("not registered", "did not find address for actor", "no actor types")


@dataclass(frozen=True, kw_only=True)
class DaprBinaries:
    daprd: Path
    placement: Path
    scheduler: Path
    version: str | None

    @classmethod
    def find(cls, bin_dir: Path | None = None) -> DaprBinaries:
        # $TASKHUB_DAPRD_DIR: another release's binaries (DAPR_VERSION=... scripts/install-daprd.sh links
        # them as .tools/daprd-<version>; `conformance versions` sets it for that engine's cells).
        if bin_dir is None:
            bin_dir = Path(os.environ["TASKHUB_DAPRD_DIR"]) if os.environ.get("TASKHUB_DAPRD_DIR") else DEFAULT_BIN_DIR
        paths = {name: bin_dir / name for name in ("daprd", "placement", "scheduler")}
        missing = [str(p) for p in paths.values() if not p.is_file()]
        if missing:
            raise DaprdNotInstalledError(f"daprd binaries not found: {', '.join(missing)}.\n"
                                         f"Install them with: {REPO_ROOT / INSTALL_SCRIPT}")
        stamp = bin_dir / "version"  # "<version> <components...>", written by the install script
        version = stamp.read_text().split()[0] if stamp.is_file() else None
        return cls(**paths, version=version)


class ControlPlane:
    """placement and scheduler (embedded etcd) for every daprd of this process, started on first use."""

    def __init__(self, *, binaries: DaprBinaries, ready_timeout: float = 60.0, mtls: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="conformance-dapr-control-"))
        self.binaries = binaries
        logs = self.root / "logs"
        # mTLS: a sentry first, whose identities placement, scheduler and the daprds then use.
        self.sentry = _start_sentry(binaries=binaries, root=self.root / "sentry") if mtls else None
        tls = self.sentry.mtls.control_plane_args() if self.sentry is not None else ()
        try:
            self._start(binaries=binaries, logs=logs, tls=tls, ready_timeout=ready_timeout)
        except BaseException:
            if self.sentry is not None:
                self.sentry.stop()
            raise

    def _start(self, *, binaries: DaprBinaries, logs: Path, tls: tuple[str, ...], ready_timeout: float) -> None:
        etcd_scheme = "https" if tls else "http"
        self.placement, (self.placement_port, *_) = start_with_free_ports(
            "placement", 4, lambda p: (
                str(binaries.placement), "--listen-address", HOST, "--port", str(p[0]),
                "--healthz-listen-address", HOST, "--healthz-port", str(p[1]),
                "--metrics-listen-address", HOST, "--metrics-port", str(p[2]),
                "--initial-cluster", f"dapr-placement-0={HOST}:{p[3]}", *tls),
            log_dir=logs, env=None, health=lambda proc, p, timeout: wait_healthy(proc, p[1], timeout=timeout),
            timeout=ready_timeout)
        try:
            etcd = self.root / "etcd"
            self.scheduler, (self.scheduler_port, *_) = start_with_free_ports(
                "scheduler", 5, lambda p: (
                    str(binaries.scheduler), "--listen-address", HOST, "--port", str(p[0]),
                    "--healthz-listen-address", HOST, "--healthz-port", str(p[1]),
                    "--metrics-listen-address", HOST, "--metrics-port", str(p[2]),
                    "--etcd-data-dir", str(etcd), "--etcd-client-listen-address", HOST,
                    "--etcd-client-port", str(p[3]),
                    "--etcd-initial-cluster", f"dapr-scheduler-server-0={etcd_scheme}://{HOST}:{p[4]}",
                    "--identity-directory-write", str(self.root / "identity"), *tls),
                log_dir=logs, env=None, health=lambda proc, p, timeout: wait_healthy(proc, p[1], timeout=timeout),
                timeout=ready_timeout)
        except BaseException:
            self.placement.stop(timeout=5)
            raise

    @property
    def placement_address(self) -> str:
        return f"{HOST}:{self.placement_port}"

    @property
    def scheduler_address(self) -> str:
        return f"{HOST}:{self.scheduler_port}"

    def daprd_security(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """The flags and environment a daprd under this plane needs (none without mTLS)."""
        if self.sentry is None:
            return (), {}
        return self.sentry.mtls.daprd_args(), self.sentry.mtls.daprd_env()

    def is_running(self) -> bool:
        return all(p.is_running() for p in (self.placement, self.scheduler, *self._sentry_process()))

    def _sentry_process(self) -> tuple[ManagedProcess, ...]:
        return (self.sentry.process,) if self.sentry is not None else ()

    def stop(self) -> None:
        for process in (self.scheduler, self.placement):
            process.stop(timeout=10)
        if self.sentry is not None:
            self.sentry.stop()
        shutil.rmtree(self.root / "etcd", ignore_errors=True)


def _start_sentry(*, binaries: DaprBinaries, root: Path) -> Any:
    return start_sentry(binaries_dir=binaries.daprd.parent, root=root)


_shared: dict[str, ControlPlane] = {}
_shared_lock = threading.Lock()


def shared_control_plane(binaries: DaprBinaries, *, mtls: bool = False) -> ControlPlane:
    """The run's control plane (one with sentry and mTLS, one without): one of each per harness
    process, stopped (by pid) when the process exits."""
    key = "plane-mtls" if mtls else "plane"
    with _shared_lock:
        plane = _shared.get(key)
        if plane is None or not plane.is_running():
            if plane is not None:
                plane.stop()
            plane = ControlPlane(binaries=binaries, mtls=mtls)
            if not _shared:
                atexit.register(_stop_shared)
            _shared[key] = plane
        return plane


def _stop_shared() -> None:
    with _shared_lock:
        planes = list(_shared.values())
        _shared.clear()
    for plane in planes:
        plane.stop()


_COMPONENT = """\
apiVersion: dapr.io/v1alpha1
kind: Component
metadata:
  name: workflowstore
spec:
  type: state.sqlite
  version: v1
  metadata:
    - name: connectionString
      value: "{db}"
    - name: actorStateStore
      value: "true"
"""


def _features(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Configuration's spec.features a target option asks for."""
    return [{"name": "WorkflowHistorySigning", "enabled": True}] if options.get("history_signing") else []


def _access_policy(app_id: str, rules: Any, scopes: Any = None) -> str:
    """A WorkflowAccessPolicy resource for `app_id` (the `schedule` operation; engine-rules R11.11),
    scoped to `app_id` unless `scopes` names the apps (daprd skips it on any other, disk.go:95-98).
    Self-hosted daprd loads it from its resources path and enforces it without mTLS."""
    import json

    scopes = [app_id] if scopes is None else list(scopes)
    lines = ["apiVersion: dapr.io/v1alpha1", "kind: WorkflowAccessPolicy", "metadata:",
             f"  name: conformance-{app_id}", *(["scopes:"] + [f"- {a}" for a in scopes] if scopes else []),
             "spec:", "  rules:"]
    for rule in rules:
        lines.append("  - callers:")
        lines += [f"    - appID: {json.dumps(c)}" for c in rule.callers]
        if rule.workflows:
            lines.append("    workflows:")
            lines += [f"    - name: {json.dumps(w)}\n      operations: [schedule]" for w in rule.workflows]
        if rule.activities:
            lines.append("    activities:")
            lines += [f"    - name: {json.dumps(a)}" for a in rule.activities]
    if not rules:
        lines[-1] = "  rules: []"
    return "\n".join(lines) + "\n"


class DaprdSidecar:
    """One daprd (unique app id, its own SQLite actor store) for one scenario; restartable on its ports."""

    def __init__(self, *, options: Mapping[str, Any], work_dir: Path, binaries: DaprBinaries | None = None,
                 ready_timeout: float = 60.0, stop_timeout: float = 15.0, app_id: str | None = None,
                 namespace: str | None = None, folder: str = "daprd", access_policy: Any = None,
                 policy_scopes: Any = None, max_body_size: int | None = None) -> None:
        self.binaries = binaries or DaprBinaries.find()
        self.version = self.binaries.version
        self.plane = shared_control_plane(self.binaries, mtls=bool(options.get("mtls")))
        self.dir = work_dir / folder
        resources = self.dir / "resources"
        resources.mkdir(parents=True, exist_ok=True)
        (resources / "statestore.yaml").write_text(_COMPONENT.format(db=self.dir / "state.db"), encoding="utf-8")
        self.app_id = app_id or f"conformance-{uuid.uuid4().hex[:12]}"
        if access_policy is not None:
            (resources / "accesspolicy.yaml").write_text(_access_policy(self.app_id, access_policy, policy_scopes),
                                                         encoding="utf-8")
        # One namespace per scenario: the apps of a scenario share it (cross-app calls stay inside one
        # namespace, engine-rules R11.1), and scenarios running at once never see each other's apps.
        self.namespace = namespace or self.app_id
        self.api_token = options.get("api_token")
        settings = settings_of(options)
        # An app's own limit (R11.15) over the scenario's.
        self.max_payload = max_body_size or settings.max_body_size or options.get("max_payload")
        # Engine settings daprd takes from its Configuration (spec.workflow), and the target's features
        # (spec.features), written once per scenario.
        spec = {k: v for k, v in (("workflow", daprd_workflow_spec(settings)),
                                  ("features", _features(options))) if v}
        self.config: Path | None = None
        if spec:
            self.config = self.dir / "config.yaml"
            self.config.write_text(yaml.safe_dump({"apiVersion": "dapr.io/v1alpha1", "kind": "Configuration",
                                                   "metadata": {"name": "conformance"},
                                                   "spec": spec}, sort_keys=False), encoding="utf-8")
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self._ports: list[int] = []
        self.process = self._launch(ports=None)

    @property
    def address(self) -> str:
        return f"{HOST}:{self._ports[0]}"

    @property
    def log_paths(self) -> list[Path]:
        return sorted(self.dir.glob("daprd-*.log"))

    def _argv(self, ports: list[int]) -> tuple[str, ...]:
        grpc_port, http_port, internal_port = ports
        argv = [str(self.binaries.daprd), "--app-id", self.app_id, "--mode", "standalone",
                "--dapr-listen-addresses", HOST, "--dapr-grpc-port", str(grpc_port),
                "--dapr-http-port", str(http_port), "--dapr-internal-grpc-port", str(internal_port),
                "--dapr-internal-grpc-listen-address", HOST, "--enable-metrics=false",
                "--placement-host-address", self.plane.placement_address,
                "--scheduler-host-address", self.plane.scheduler_address,
                "--resources-path", str(self.dir / "resources"), "--dapr-graceful-shutdown-seconds", "1",
                "--log-level", "info"]
        if self.config is not None:
            argv += ["--config", str(self.config)]
        if self.max_payload:
            # A resource quantity; a plain number is bytes. daprd's gRPC server limit follows it.
            argv += ["--max-body-size", str(int(self.max_payload))]
        argv += self.plane.daprd_security()[0]
        return tuple(argv)

    def _env(self) -> dict[str, str] | None:
        import os

        env = {k: v for k, v in os.environ.items() if k != "DAPR_API_TOKEN"}
        # Placement disseminates actor types per namespace to every daprd in it: with one namespace
        # per daprd, scenarios starting and stopping do not hold up each other's actor registration.
        env["NAMESPACE"] = self.namespace
        if self.api_token:
            env["DAPR_API_TOKEN"] = str(self.api_token)
        env.update(self.plane.daprd_security()[1])
        return env

    def _launch(self, *, ports: list[int] | None) -> ManagedProcess:
        def health(process: ManagedProcess, p: list[int], timeout: float) -> None:
            wait_healthy(process, p[1], timeout=timeout, path="/v1.0/healthz/outbound")

        if ports is not None:
            # A restart keeps the gRPC port, so the proxy in front of it and the clients reconnect by themselves.
            process = ManagedProcess.start(spec=ProcessSpec(name="daprd", argv=self._argv(ports), log_dir=self.dir,
                                                            env=self._env()))
            try:
                health(process, ports, timeout=self.ready_timeout)
            except BaseException:
                process.kill()
                raise
            return process
        process, self._ports = start_with_free_ports("daprd", 3, self._argv, log_dir=self.dir, env=self._env(),
                                                      health=health, timeout=self.ready_timeout)
        return process

    def wait_until_workflows_ready(self, *, timeout: float = 60.0) -> None:
        """After a worker connects: wait until daprd has registered the workflow actor types."""
        wait_workflows_ready(self.address, api_token=self.api_token, timeout=timeout, process=self.process)

    def stop(self) -> None:
        self.process.stop(timeout=self.stop_timeout)

    def kill(self) -> None:
        self.process.kill()

    def restart(self) -> None:
        if self.process.is_running():
            self.stop()
        self.process = self._launch(ports=self._ports)

    def __repr__(self) -> str:
        return f"<DaprdSidecar {self.version} {self.app_id} {self.address}>"


class DaprdApps:
    """Several apps (workflows across apps): one daprd per app id, under the run's placement and
    scheduler, in one namespace of their own; the first app's daprd is `address` (R11.1)."""

    def __init__(self, *, apps: list[str], options: Mapping[str, Any], work_dir: Path) -> None:
        run = uuid.uuid4().hex[:12]
        namespace = f"conformance-{run}"
        self.apps: dict[str, DaprdSidecar] = {}
        try:
            policies = dict(options.get("access_policies") or {})
            scopes = dict(options.get("policy_scopes") or {})
            limits = dict(options.get("app_body_limits") or {})
            # An app with its own namespace (R11.14) gets it, made unique to this scenario as the shared one.
            own = {app: f"{ns}-{run}" for app, ns in dict(options.get("app_namespaces") or {}).items()}
            for app in apps:
                self.apps[app] = DaprdSidecar(options=options, work_dir=work_dir, app_id=app,
                                              namespace=own.get(app, namespace), folder=f"daprd-{app}",
                                              access_policy=policies.get(app), policy_scopes=scopes.get(app),
                                              max_body_size=limits.get(app))
        except BaseException:
            self.stop()
            raise
        self.first = self.apps[apps[0]]
        self.version = self.first.version

    @property
    def address(self) -> str:
        return self.first.address

    @property
    def app_addresses(self) -> dict[str, str]:
        return {app: d.address for app, d in self.apps.items()}

    @property
    def log_paths(self) -> list[Path]:
        return [p for d in self.apps.values() for p in d.log_paths]

    def wait_until_workflows_ready(self, *, app: str | None = None, timeout: float = 60.0) -> None:
        (self.apps[app] if app is not None else self.first).wait_until_workflows_ready(timeout=timeout)

    def stop(self) -> None:
        for d in self.apps.values():
            d.stop()

    def kill(self, *, app: str | None = None) -> None:
        for d in self._each(app):
            d.kill()

    def restart(self, *, app: str | None = None) -> None:
        for d in self._each(app):
            d.restart()

    def _each(self, app: str | None) -> list[DaprdSidecar]:
        """Every app's daprd, or only `app`'s (a scenario step restarting one app)."""
        return list(self.apps.values()) if app is None else [self.apps[app]]

    def __repr__(self) -> str:
        return f"<DaprdApps {self.version} {', '.join(self.apps)}>"


def start_daprd(*, options: Mapping[str, Any], work_dir: Path) -> DaprdSidecar | DaprdApps:
    apps = list(options.get("apps") or ())
    if apps:
        return DaprdApps(apps=apps, options=options, work_dir=work_dir)
    return DaprdSidecar(options=options, work_dir=work_dir)


def wait_workflows_ready(address: str, *, api_token: str | None = None, timeout: float = 60.0,
                         process: ManagedProcess | None = None) -> None:
    """Wait until the engine at `address` accepts workflow calls (daprd: a worker is connected and
    the workflow actor types are registered with placement).

    A harmless call, RaiseEvent to an id nobody uses, times out or fails with "actor type ... not
    registered" until then, as StartInstance would; afterwards daprd answers "no such instance
    exists". (GetInstance is no probe: daprd answers it from the state store at once.) Any other
    answer, OK or an error, comes from the workflow engine itself, so engines without this start-up
    window return at once.
    """
    from taskhub_wire import pb
    from taskhub_wire.rpc import TaskHubClient

    metadata = (("dapr-api-token", str(api_token)),) if api_token else ()
    deadline = time.monotonic() + timeout
    last = "no attempt"
    with grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)]) as channel:
        client = TaskHubClient(channel, metadata=metadata)
        while True:
            try:
                client.call("RaiseEvent", pb.RaiseEventRequest(instanceId=f"readiness-probe-{uuid.uuid4().hex}",
                                                               name="readiness-probe"), timeout=3)
                return
            except grpc.RpcError as exc:
                if not (exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                        or any(s in (exc.details() or "") for s in _NOT_READY)):
                    return
                last = f"{exc.code().name}: {exc.details()}"
            where = f"; log {process.stdout_path}" if process is not None else ""
            if process is not None and not process.is_running():
                raise RuntimeError(f"daprd exited (code {process.returncode}){where}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the engine at {address} did not accept workflow calls within {timeout:g}s of "
                                   f"the worker connecting (last: {last}){where}")
            time.sleep(0.1)
