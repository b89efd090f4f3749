"""Dapr Sentry for the daprd target's mTLS variant (`daprd-mtls`, option `mtls: true`).

Sentry is the certificate authority of a Dapr deployment: placement, scheduler and every daprd ask it
for a SPIFFE X.509 identity (spiffe://<trust domain>/ns/<namespace>/<app id>) and talk to each other
over mTLS. With those identities a daprd knows which app is calling it, which workflow access policies
(engine-rules R11.11) and history signing (R12.7) need.

The trust bundle is made at run time by sentry itself: started self-hosted on an empty issuer
credentials directory, it generates a root and an issuer certificate there (dapr v1.18.2
pkg/sentry/server/ca/ca.go:113-171), and the root (ca.crt) is then the trust anchors everyone else
gets. The flags follow dapr's own integration framework (tests/integration/framework/process/
sentry/sentry.go, placement/placement.go, scheduler/scheduler.go, daprd/options.go WithSentry).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conformance.targets.dapr_processes import HOST, DaprdNotInstalledError, start_with_free_ports, wait_healthy
from conformance.targets.process import ProcessExitedError

# sentry's default; the control plane and every daprd are told the same one.
TRUST_DOMAIN = "localhost"
# An empty Configuration: sentry's self-hosted defaults (workload certificates valid 24 h).
_CONFIG = "apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: daprsystem\nspec: {}\n"


class SentryStartError(RuntimeError):
    """Sentry did not start or did not write its trust bundle; the message names its log."""


@dataclass(frozen=True, kw_only=True)
class Mtls:
    """How placement, scheduler and daprd reach one running sentry and trust what it issues."""

    sentry_address: str
    trust_anchors_file: Path
    trust_domain: str = TRUST_DOMAIN

    def control_plane_args(self) -> tuple[str, ...]:
        """placement's and scheduler's flags (both take the same four)."""
        return ("--tls-enabled", "--sentry-address", self.sentry_address,
                "--trust-anchors-file", str(self.trust_anchors_file), "--trust-domain", self.trust_domain)

    def daprd_args(self) -> tuple[str, ...]:
        return ("--enable-mtls", "--sentry-address", self.sentry_address,
                "--control-plane-trust-domain", self.trust_domain)

    def daprd_env(self) -> dict[str, str]:
        # daprd takes its trust anchors as PEM text in the environment, not as a file.
        return {"DAPR_TRUST_ANCHORS": self.trust_anchors_file.read_text(encoding="ascii")}


class Sentry:
    """One sentry on 127.0.0.1 (free ports), with a trust bundle it generates into `root`."""

    def __init__(self, *, binary: Path, root: Path, ready_timeout: float = 60.0) -> None:
        if not binary.is_file():
            raise DaprdNotInstalledError(f"sentry binary not found: {binary} (the daprd-mtls target needs it).\n"
                                         "Install it with: scripts/install-daprd.sh (it builds sentry next to daprd)")
        credentials = root / "credentials"
        credentials.mkdir(parents=True, exist_ok=True)
        config = root / "sentry-config.yaml"
        config.write_text(_CONFIG, encoding="utf-8")
        logs = root / "logs"
        # --healthz-listen-address is taken but not used by sentry v1.18.2 (cmd/sentry/app/app.go:184-189
        # hands the healthz server only the port), so its healthz port, picked free, listens on every
        # interface; the CA's gRPC port is on 127.0.0.1. Passed anyway, for releases that honour it.
        try:
            self.process, (self.port, *_) = start_with_free_ports(
                "sentry", 2, lambda p: (
                    str(binary), "--config", str(config), "--issuer-credentials", str(credentials),
                    "--trust-domain", TRUST_DOMAIN, "--listen-address", HOST, "--port", str(p[0]),
                    "--healthz-listen-address", HOST, "--healthz-port", str(p[1]), "--enable-metrics=false",
                    "--log-level", "info"),
                log_dir=logs, env=None, health=lambda proc, p, timeout: wait_healthy(proc, p[1], timeout=timeout),
                timeout=ready_timeout)
        except (ProcessExitedError, TimeoutError) as exc:
            raise SentryStartError(f"sentry did not start: {exc}\nsentry's log is in {logs}; the mTLS "
                                   "control plane cannot run without it") from None
        anchors = credentials / "ca.crt"  # written before sentry reports healthy (ca.go:168)
        if not anchors.is_file():
            log = self.process.stdout_path
            self.process.stop(timeout=5)
            raise SentryStartError(f"sentry is up but wrote no trust anchors ({anchors}); its log: {log}")
        self.mtls = Mtls(sentry_address=f"{HOST}:{self.port}", trust_anchors_file=anchors)

    @property
    def log_path(self) -> Path:
        return self.process.stdout_path

    def stop(self) -> None:
        self.process.stop(timeout=10)


def start_sentry(*, binaries_dir: Path, root: Path) -> Sentry:
    """Sentry from the same build as daprd (scripts/install-daprd.sh puts it next to daprd)."""
    return Sentry(binary=binaries_dir / "sentry", root=root)

