"""An SDK from its author's local checkout (`conformance run --sdk-path PATH`): which SDK the folder
holds, and an environment for it that follows the checkout.

Layouts recognised, as the SDKs' authors keep them today:
  dapr-ext-workflow      python-sdk's repository root in the 1.18 layout (ext/dapr-ext-workflow/ beside the
                         core package; the ext/dapr-ext-workflow folder itself is taken as its root)
  dapr                   python-sdk's repository root in the merged layout (dapr/ext/workflow/ inside
                         `dapr`, 1.19 on); --worker picks either target for either layout
  durabletask-dapr       a durabletask-python checkout (the `durabletask-dapr` distribution)
  durabletask-js         a durabletask-js checkout (@dapr/durabletask-js; built here with its own tsc)
  durabletask-go-worker  a durabletask-go checkout (the driver is built against it with a `replace`)
  durabletask-java       a java-sdk checkout (its durabletask-client module, built by its own Maven build), or
                         an older durabletask-java checkout (its client module compiled here with Maven);
                         offline once the dependencies are in the project's Maven repository

One environment per checkout, under the user cache (`taskhub-conformance/sdk/<worker>-<hash of the path>`):
created once; for the Python SDKs an editable install of the checkout (so an edit is seen by the next run
without reinstalling; nothing the checkout provides comes from the registry), recreated only when a file
that declares the SDK's dependencies changes. The JS, Go and Java SDKs are rebuilt on each run, only as
far as their sources changed (a digest table per checkout, conformance/targets/sources.py: the JS files an
edit touched are transpiled alone, nothing when none did; Go's build cache; Maven's up-to-date check).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from conformance.errors import InputError
from conformance.targets.sources import Build, BuildStep

CACHE_ENV = "TASKHUB_CONFORMANCE_CACHE"
_RECIPE = "3"  # bump when what an environment holds changes, so existing ones are recreated


class CheckoutError(InputError):
    """A --sdk-path that is not an SDK checkout, or one whose environment cannot be made."""


@dataclass(frozen=True, kw_only=True)
class Checkout:
    worker: str  # the worker target it replaces the SDK of
    root: Path  # the repository root (absolute)
    layout: str  # in words, for the run's header
    deps: tuple[Path, ...]  # the files that declare its dependencies: the environment is recreated when they change
    editable: tuple[Path, ...] = ()  # Python: the folders installed editable, in this order

    @property
    def env_dir(self) -> Path:
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        # One per checkout: python-sdk's is the same whichever of its two targets runs it.
        family = "python-sdk" if self.worker in _PYTHON_SDK_WORKERS else self.worker
        return cache_root() / "sdk" / f"{family}-{digest}"


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "taskhub-conformance"


# --- which SDK a folder holds --------------------------------------------------------------------

def _project_name(folder: Path) -> str:
    """The distribution name a pyproject.toml (or setup.cfg) declares, "" when none."""
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            name = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("name", "")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            name = ""
        if name:
            return str(name)
    setup_cfg = folder / "setup.cfg"
    if setup_cfg.is_file():
        m = re.search(r"^name\s*=\s*(\S+)", setup_cfg.read_text(encoding="utf-8", errors="replace"), re.M)
        if m:
            return m.group(1)
    return ""


def _existing(*paths: Path) -> tuple[Path, ...]:
    return tuple(p for p in paths if p.is_file())


def _python_sdk(root: Path) -> Checkout | None:
    if _project_name(root) != "dapr":
        return None
    ext = root / "ext" / "dapr-ext-workflow"
    if (ext / "pyproject.toml").is_file() or (ext / "setup.py").is_file():
        return Checkout(worker="dapr-ext-workflow", root=root, layout="python-sdk, ext/dapr-ext-workflow beside dapr",
                        deps=_existing(root / "pyproject.toml", root / "setup.py", root / "setup.cfg",
                                       ext / "pyproject.toml", ext / "setup.py", ext / "setup.cfg"),
                        editable=(root, ext))
    if (root / "dapr" / "ext" / "workflow").is_dir():  # 1.19 on: the `dapr` target (its gaps are 1.19's)
        return Checkout(worker="dapr", root=root, layout="python-sdk, workflow inside dapr",
                        deps=_existing(root / "pyproject.toml", root / "setup.py", root / "setup.cfg"),
                        editable=(root,))
    return None


def _durabletask_python(root: Path) -> Checkout | None:
    if _project_name(root) != "durabletask-dapr":
        return None
    return Checkout(worker="durabletask-dapr", root=root, layout="durabletask-python",
                    deps=_existing(root / "pyproject.toml", root / "setup.py", root / "setup.cfg",
                                   root / "requirements.txt"), editable=(root,))


def _durabletask_js(root: Path) -> Checkout | None:
    package = root / "package.json"
    if not package.is_file() or '"@dapr/durabletask-js"' not in package.read_text(encoding="utf-8", errors="replace"):
        return None
    return Checkout(worker="durabletask-js", root=root, layout="durabletask-js",
                    deps=_existing(package, root / "package-lock.json"))


def _durabletask_go(root: Path) -> Checkout | None:
    gomod = root / "go.mod"
    if not gomod.is_file() or not re.search(r"^module\s+github\.com/dapr/durabletask-go\s*$",
                                            gomod.read_text(encoding="utf-8", errors="replace"), re.M):
        return None
    return Checkout(worker="durabletask-go-worker", root=root, layout="durabletask-go", deps=(gomod,))


def _durabletask_java(root: Path) -> Checkout | None:
    # Today's client is java-sdk's durabletask-client module (io.dapr:durabletask-client 1.17 on, Maven);
    # the durabletask-java repository (Gradle, the 1.5 line) is its past.
    module, parent = root / "durabletask-client" / "pom.xml", root / "pom.xml"
    if module.is_file() and parent.is_file() and "dapr-sdk-parent" in parent.read_text(encoding="utf-8",
                                                                                       errors="replace"):
        return Checkout(worker="durabletask-java", root=root, layout="java-sdk (durabletask-client module)",
                        deps=_existing(root / "pom.xml", module))
    settings = root / "settings.gradle"
    if not settings.is_file() or not (root / "client" / "src" / "main" / "java").is_dir():
        return None
    if "durabletask" not in settings.read_text(encoding="utf-8", errors="replace"):
        return None
    return Checkout(worker="durabletask-java", root=root, layout="durabletask-java (client module)",
                    deps=_existing(root / "client" / "build.gradle", root / "build.gradle"))


# python-sdk's two targets: the release with the extension (1.18) and the one with the workflow SDK in core (1.19).
_PYTHON_SDK_WORKERS = ("dapr-ext-workflow", "dapr")
_DETECTORS: tuple[Callable[[Path], Checkout | None], ...] = (
    _python_sdk, _durabletask_python, _durabletask_js, _durabletask_go, _durabletask_java)
WORKERS = ("dapr", "dapr-ext-workflow", "durabletask-dapr", "durabletask-js", "durabletask-go-worker", "durabletask-java")


def detect(path: Path, *, worker: str | None = None) -> Checkout:
    """The SDK checkout at `path` (for `worker`, when given); a CheckoutError says what is wrong and what to pass."""
    shown = str(path)
    path = Path(os.path.abspath(path.expanduser()))
    if not path.exists():
        raise CheckoutError(f"--sdk-path {shown}: no such folder")
    if not path.is_dir():
        raise CheckoutError(f"--sdk-path {shown}: a file, not a folder; give the SDK's repository root")
    # The README of old sent authors to python-sdk's ext/dapr-ext-workflow: its repository root is two up.
    candidates = [path]
    if path.name == "dapr-ext-workflow" and path.parent.name == "ext":
        candidates.insert(0, path.parent.parent)
    for root in candidates:
        for found in (d(root) for d in _DETECTORS):
            if found is None:
                continue
            if worker in _PYTHON_SDK_WORKERS and found.worker in _PYTHON_SDK_WORKERS:
                found = replace(found, worker=worker)  # either layout runs as either release's target
            if worker is not None and found.worker != worker:
                raise CheckoutError(f"--sdk-path {shown} is a {found.layout} checkout, the SDK of worker "
                                    f"{found.worker}, not of {worker}; run it with --worker {found.worker} "
                                    "(or without --worker)")
            return found
    what = _what_is_there(path)
    raise CheckoutError(f"--sdk-path {shown}: not a checkout of a known SDK ({what}). Give the repository root of "
                        "one of: python-sdk (dapr-ext-workflow, dapr), durabletask-python (durabletask-dapr), "
                        "durabletask-js, durabletask-go, java-sdk or durabletask-java (durabletask-java)")


def _what_is_there(path: Path) -> str:
    if name := _project_name(path):
        return f"its pyproject.toml declares {name!r}"
    if (path / "go.mod").is_file():
        first = (path / "go.mod").read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        return f"its go.mod says {first[0].strip()!r}" if first else "an empty go.mod"
    if (path / "package.json").is_file():
        return "its package.json is not @dapr/durabletask-js"
    if (path / "setup.py").is_file():
        return "a setup.py of another project"
    return "no pyproject.toml, setup.py, package.json, go.mod or settings.gradle there"


# --- the environment ------------------------------------------------------------------------------

def _digest(files: Sequence[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f).encode() + b"\0" + f.read_bytes() + b"\0")
    for e in extra:
        h.update(e.encode() + b"\0")
    return h.hexdigest()


def _run(argv: Sequence[str], *, what: str, cwd: Path | None = None, env: dict[str, str] | None = None,
         log: Path) -> None:
    """Run a build or install step, its output to `log`; a failure is a CheckoutError with the log's end."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise CheckoutError(f"{what}: {argv[0]} not found; install it or put it on PATH") from None
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        raise CheckoutError(f"{what} failed (exit {done.returncode}; full log {log}):\n{tail}")


def _revision(root: Path) -> str:
    try:
        head = subprocess.run(["git", "-C", str(root), "describe", "--always", "--tags", "--dirty=+dirty"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return head.stdout.strip() if head.returncode == 0 else ""


def _fresh(env: Path, stamp: str) -> bool:
    return (env / ".stamp").is_file() and (env / ".stamp").read_text(encoding="utf-8") == stamp


def _python_env(c: Checkout, *, python: str) -> tuple[Path, bool]:
    """A venv with the checkout installed editable; (its python, whether it was created now)."""
    env = c.env_dir
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True).stdout
    stamp = _digest(c.deps, _RECIPE, version, *map(str, c.editable))
    py = env / "venv" / "bin" / "python"
    if _fresh(env, stamp) and py.exists():
        return py, False
    shutil.rmtree(env, ignore_errors=True)
    env.mkdir(parents=True)
    log = env / "install.log"
    _run([python, "-m", "venv", str(env / "venv")], what=f"creating the environment {env}", log=log)
    args = [a for folder in c.editable for a in ("-e", str(folder))]
    # One resolver run for every folder: what the checkout provides (dapr for its extension) comes from it.
    _run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
         what=f"installing {c.root} into {env}", log=log)
    (env / ".stamp").write_text(stamp, encoding="utf-8")
    return py, True


def _js_env(c: Checkout, *, driver: Path) -> tuple[Path, bool, BuildStep]:
    """The checkout built into its build/ folder (as its own scripts/build.sh does) and a copy of the
    driver whose @dapr/durabletask-js is that folder; (the driver copy's folder, whether it was created now,
    what the build did)."""
    env = c.env_dir
    log = env / "build.log"
    npm = os.environ.get("NPM", "npm")
    env.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    if not (c.root / "node_modules" / "typescript").is_dir():  # the checkout's own tools, once
        _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=c.root,
             what=f"npm ci in {c.root} (its build tools)", log=log)
    if not (c.root / "src" / "version.ts").is_file() and (c.root / "scripts" / "prebuild.sh").is_file():
        _run(["bash", "scripts/prebuild.sh"], cwd=c.root, what="its scripts/prebuild.sh", log=log)
    build = c.root / "build"
    step = _js_build(c, build=build, node=os.environ.get("NODE", "node"), log=log)
    stamp = _digest((*c.deps, *sorted(driver.glob("package*.json"))), _RECIPE)
    copy = env / "driver"
    if not (_fresh(env, stamp) and (copy / "node_modules" / "@dapr" / "durabletask-js").exists()):
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir(parents=True)
        for f in driver.glob("package*.json"):
            shutil.copy2(f, copy / f.name)
        _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=copy,
             what=f"npm ci in {copy}", log=log)
        target = copy / "node_modules" / "@dapr" / "durabletask-js"
        shutil.rmtree(target, ignore_errors=True)
        target.symlink_to(build, target_is_directory=True)  # follows every rebuild of the checkout
        (env / ".stamp").write_text(stamp, encoding="utf-8")
        created = True
    else:
        created = False
    for f in driver.iterdir():  # the driver's own files, fresh each run (they change with this library)
        if f.is_file() and f.suffix in (".js", ".json") and not f.name.startswith("package"):
            shutil.copy2(f, copy / f.name)
    return copy, created, step


# TypeScript's transpileModule on the named files, with the checkout's tsconfig: each file alone, no type check.
_TRANSPILE = r"""
const [tsPath, config, out, ...files] = process.argv.slice(1);
const ts = require(tsPath), fs = require("fs"), path = require("path");
const parsed = ts.getParsedCommandLineOfConfigFile(config, {}, {...ts.sys, onUnRecoverableConfigFileDiagnostic: d => {
  console.error(ts.flattenDiagnosticMessageText(d.messageText, "\n")); process.exit(1); }});
const options = {...parsed.options, outDir: out, declaration: false, incremental: false};
const rootDir = parsed.options.rootDir || path.dirname(config);
let failed = false;
for (const f of files) {
  const r = ts.transpileModule(fs.readFileSync(f, "utf8"), {compilerOptions: options, fileName: f, reportDiagnostics: true});
  for (const d of r.diagnostics || []) { failed = true; console.error(f + ": " + ts.flattenDiagnosticMessageText(d.messageText, "\n")); }
  const target = path.join(out, path.relative(rootDir, f)).replace(/\.tsx?$/, ".js");
  fs.mkdirSync(path.dirname(target), {recursive: true});
  fs.writeFileSync(target, r.outputText);
  console.log("transpiled " + f);
}
process.exit(failed ? 1 : 0);
"""
_JS_SOURCES = ("src/**/*.ts", "src/**/*.js", "tsconfig.json", "package.json")


def _js_build(c: Checkout, *, build: Path, node: str, log: Path) -> BuildStep:
    """The checkout's src/ into build/: the whole tsc build when there is none, when a file was added or
    removed, or when tsconfig.json, package.json or a plain .js module (the generated protobuf code)
    changed; otherwise only the edited .ts files, transpiled one by one (TypeScript's transpileModule,
    no type check: the checkout's own `npm run build` checks types), and nothing when none changed.
    Returns what it did."""
    from conformance.targets.sources import compare, load, save, snapshot

    stamp = c.env_dir / "sources.json"
    table = snapshot(c.root, patterns=_JS_SOURCES)
    old = load(stamp) if (build / "index.js").is_file() else None
    changes = compare(old, table) if old is not None else None
    if changes is not None and changes.none:
        return BuildStep(build=Build.UP_TO_DATE, tool="")
    edited = changes.modified if changes is not None and not (changes.added or changes.removed) else ()
    if edited and all(f.startswith("src/") and f.endswith(".ts") and not f.endswith(".d.ts") for f in edited):
        save(stamp, {})  # a transpile that fails half way leaves no table: the next run builds all
        _run([node, "-e", _TRANSPILE, str(c.root / "node_modules" / "typescript"), str(c.root / "tsconfig.json"),
              str(build), *(str(c.root / f) for f in edited)], cwd=c.root, what=f"transpiling {', '.join(edited)}",
             log=log)
        save(stamp, table)
        return BuildStep(build=Build.TRANSPILED, tool="TypeScript's transpileModule", files=edited)
    save(stamp, {})
    _run([str(c.root / "node_modules" / ".bin" / "tsc"), "--outDir", str(build), "--incremental",
          "--tsBuildInfoFile", str(build / ".tsbuildinfo")], cwd=c.root, what=f"tsc in {c.root}", log=log)
    # As its build.sh: the package.json and the generated protobuf modules (plain .js, which tsc leaves out).
    shutil.copy2(c.root / "package.json", build / "package.json")
    if (c.root / "src" / "proto").is_dir():
        shutil.copytree(c.root / "src" / "proto", build / "proto", dirs_exist_ok=True)
    save(stamp, table)
    return BuildStep(build=Build.FULL, tool="tsc --incremental")


def _go_binary(c: Checkout, *, driver: Path, tools: Path) -> tuple[Path, bool, BuildStep]:
    """The Go driver built against the checkout (a `replace`); Go's build cache makes a rebuild incremental."""
    env = c.env_dir
    src = env / "src"
    created = not src.is_dir()
    src.mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.go"):
        f.unlink()
    for f in driver.iterdir():
        if f.suffix == ".go" and not f.name.endswith("_test.go") or f.name in ("go.mod", "go.sum"):
            shutil.copy2(f, src / f.name)
    go = os.environ.get("GO", "go")
    env_vars = {**os.environ, "GOTOOLCHAIN": "local", "GOPATH": str(tools / "go"),
                "GOMODCACHE": str(tools / "go" / "pkg" / "mod"), "GOCACHE": str(tools / "go-build"),
                "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -modcacherw"}
    log = env / "build.log"
    log.write_text("", encoding="utf-8")
    _run([go, "mod", "edit", "-replace", f"github.com/dapr/durabletask-go={c.root}"], cwd=src, env=env_vars,
         what="go mod edit -replace", log=log)
    binary = env / "durabletask-go-driver"
    _run([go, "build", "-o", str(binary), "."], cwd=src, env=env_vars,
         what=f"go build of the driver against {c.root}", log=log)
    return binary, created, BuildStep(build=Build.INCREMENTAL, tool="go build, with Go's build cache")


def _base_python() -> str:
    """The interpreter SDK environments are made with: $PYTHON, else python3 (as scripts/install-sdks.sh)."""
    return os.environ.get("PYTHON") or shutil.which("python3") or sys.executable


__all__ = ["CACHE_ENV", "Checkout", "CheckoutError", "WORKERS", "cache_root", "detect"]
