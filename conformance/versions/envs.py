"""One environment per SDK release, cached in the user cache like daprd's build.

`~/.cache/taskhub-conformance/<sdk>-<version>/` (or $TASKHUB_CONFORMANCE_CACHE, else $XDG_CACHE_HOME)
holds a virtualenv (pip), a driver copy with its node_modules (npm), a driver binary (go) or a
driver jar with its libraries (maven). `.installed` records what was installed and the driver
sources it was built from; when both match, nothing is done. Each environment holds the one SDK
release and the driver, nothing of another release.

`worker_command` turns the worker target's declared command into the same command on the cached
environment, so the target's capabilities and gaps stay the suite's.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conformance.errors import InputError
from conformance.versions.catalogue import SdkRelease, Toolchain

STAMP = ".installed"
INSTALL_TIMEOUT_S = 1800
GO_MODULE = "github.com/dapr/durabletask-go"
# The driver files each toolchain builds from (a change rebuilds the cached environment).
DRIVER_DIRS = {Toolchain.NPM: "drivers/durabletask_js", Toolchain.GO: "drivers/durabletask_go",
               Toolchain.MAVEN: "drivers/durabletask_java"}
_NOT_BUILT = frozenset({"target.yaml", "README.md"})


class EnvError(InputError):
    """An SDK release whose environment could not be made; the message says which step and why."""


def cache_root() -> Path:
    """Where daprd's build is cached too (scripts/install-daprd.sh): one folder per user."""
    explicit = os.environ.get("TASKHUB_CONFORMANCE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "taskhub-conformance"


@dataclass(frozen=True, kw_only=True)
class Env:
    release: SdkRelease
    path: Path
    reused: bool  # found in the cache
    seconds: float

    def worker_command(self, declared: str) -> str:
        """The target's declared command with its SDK program swapped for this environment's."""
        words = shlex.split(declared)
        tc = self.release.toolchain
        if tc is Toolchain.PIP:
            words[0] = str(self.path / "bin" / "python")
        elif tc is Toolchain.NPM:
            i = next(i for i, w in enumerate(words) if w.endswith("driver.js"))
            words[i] = str(self.path / "driver.js")
        elif tc is Toolchain.GO:
            words[0] = str(self.path / "durabletask-go-driver")
        else:
            words[0] = str(self.path / "bin" / "durabletask-java-driver")
        # {address}/{programs}/{canonical}/{root} stay placeholders for the harness.
        return " ".join(w if w.startswith("{") else shlex.quote(w) for w in words)


def _sources_hash(root: Path, release: SdkRelease) -> str:
    sub = DRIVER_DIRS.get(release.toolchain)
    h = hashlib.sha256(" ".join(release.spec).encode())
    if sub:
        base = root / sub
        for p in sorted(base.rglob("*")):
            # The target file and README are read at run time, never built: an edit of a capability or a gap
            # there must not rebuild every release's driver (nor make worktrees that differ only there take
            # turns rebuilding the shared cache).
            if p.is_file() and "node_modules" not in p.parts and not p.name.endswith("_test.go") \
                    and "test" not in p.relative_to(base).parts[:1] and p.name not in _NOT_BUILT:
                h.update(str(p.relative_to(base)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


def ensure(release: SdkRelease, *, root: Path, log=print) -> Env:
    """The release's cached environment, made when missing or out of date. Several processes may ask
    for the same release at once (`--sdk-version` runs, pytest workers): one makes it, the others wait
    on its lock file and then find it made."""
    import fcntl

    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{release.key}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_locked(release, root=root, log=log)


def _ensure_locked(release: SdkRelease, *, root: Path, log) -> Env:
    import time

    path = cache_root() / release.key
    want = f"{release.toolchain.value} {' '.join(release.spec)} sources={_sources_hash(root, release)}"
    stamp = path / STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8").splitlines()[:1] == [want]:
        return Env(release=release, path=path, reused=True, seconds=0.0)
    began = time.monotonic()
    log(f"versions: making the environment of {release.label} in {path}")
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    try:
        {Toolchain.PIP: _pip, Toolchain.NPM: _npm, Toolchain.GO: _go, Toolchain.MAVEN: _maven}[release.toolchain](
            release, path, root)
    except EnvError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    stamp.write_text(want + "\n", encoding="utf-8")
    return Env(release=release, path=path, reused=False, seconds=time.monotonic() - began)


def _run(argv: list[str], *, cwd: Path, what: str, env: dict[str, str] | None = None) -> str:
    # Without PYTHONPATH: the library root on it holds this project's own metadata (egg-info), which
    # the SDK environment's `pip check` would read as installed there.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                              env={**clean, **(env or {})})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvError(f"{what}: {shlex.join(argv)} could not run: {exc}") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise EnvError(f"{what}: {shlex.join(argv)} exited {done.returncode}:\n{tail}")
    return done.stdout


def _pip(release: SdkRelease, path: Path, root: Path) -> None:
    what = f"installing {release.label}"
    _run([sys.executable, "-m", "venv", str(path)], cwd=root, what=what)
    py = str(path / "bin" / "python")
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *release.spec, "pyyaml==6.0.3"],
         cwd=root, what=what)
    _run([py, "-m", "pip", "check"], cwd=root, what=f"{what} (pip check)")
    (path / "freeze.txt").write_text(_run([py, "-m", "pip", "freeze"], cwd=root, what=what), encoding="utf-8")


def _npm(release: SdkRelease, path: Path, root: Path) -> None:
    src = root / DRIVER_DIRS[Toolchain.NPM]
    for f in [*src.glob("*.js"), src / "package.json", src / "package-lock.json"]:
        shutil.copy2(f, path / f.name)
    what = f"installing {release.label}"
    quiet = ["--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    _run(["npm", "ci", *quiet], cwd=path, what=what)
    _run(["npm", "install", "--no-save", *quiet, release.spec[0]], cwd=path, what=what)
    _run(["node", "-e", 'require("@dapr/durabletask-js")'], cwd=path, what=f"{what} (load check)")


def _go(release: SdkRelease, path: Path, root: Path) -> None:
    src = root / DRIVER_DIRS[Toolchain.GO]
    build = path / "src"
    build.mkdir()
    for f in [*src.glob("*.go"), src / "go.mod", src / "go.sum"]:
        if not f.name.endswith("_test.go"):
            shutil.copy2(f, build / f.name)
    tools = root / ".tools"
    env = {"GOPATH": str(tools / "go"), "GOMODCACHE": str(tools / "go" / "pkg" / "mod"),
           "GOCACHE": str(tools / "go-build"), "CGO_ENABLED": "0", "GOTOOLCHAIN": "local",
           "GOFLAGS": "-mod=mod -modcacherw -trimpath"}
    what = f"building the Go driver with {release.label}"
    _run(["go", "get", release.spec[0]], cwd=build, what=what, env=env)
    module, _, version = release.spec[0].partition("@")
    # A release without detached workflows gets the driver's variant that refuses spawn steps as a
    # capability gap (drivers/durabletask_go/detached_absent.go), as scripts/install-go-driver.sh does.
    sdk_dir = Path(_run(["go", "list", "-m", "-f", "{{.Dir}}", module], cwd=build, what=what, env=env).strip())
    tags = [] if (sdk_dir / "task" / "detached.go").is_file() else ["-tags", "nodetached"]
    _run(["go", "build", *tags, "-o", str(path / "durabletask-go-driver"), "."], cwd=build, what=what, env=env)
    info = _run(["go", "version", "-m", str(path / "durabletask-go-driver")], cwd=build, what=what, env=env)
    if f"{module}\t{version}" not in info:
        raise EnvError(f"{what}: the binary does not link {module} {version} (go version -m)")


def _maven(release: SdkRelease, path: Path, root: Path) -> None:
    project = root / DRIVER_DIRS[Toolchain.MAVEN]
    version = release.spec[0].rsplit(":", 1)[1]
    build = path / "build"
    what = f"building the Java driver with {release.label}"
    _run(["mvn", "-B", "-q", "-f", str(project / "pom.xml"), f"-Dmaven.repo.local={root / '.tools' / 'm2'}",
          f"-Ddriver.build.dir={build}", "-Dmaven.test.skip=true", "-Dstyle.color=never",
          f"-Ddurabletask.version={version}", "clean", "package"], cwd=root, what=what)
    jar = build / "durabletask-java-driver.jar"
    if not jar.is_file() or not (build / "lib" / f"durabletask-client-{version}.jar").is_file():
        raise EnvError(f"{what}: no {jar} with lib/durabletask-client-{version}.jar")
    shutil.copy2(jar, path / jar.name)
    shutil.copytree(build / "lib", path / "lib")
    shutil.rmtree(build)
    java = shutil.which("java") or "java"
    launcher = path / "bin" / "durabletask-java-driver"
    launcher.parent.mkdir()
    launcher.write_text('#!/bin/sh\nhere=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)\n'
                        f'exec "{java}" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC ${{JAVA_OPTS:-}} '
                        '-jar "$here/durabletask-java-driver.jar" "$@"\n', encoding="utf-8")
    launcher.chmod(0o755)
