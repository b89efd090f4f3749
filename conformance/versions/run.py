"""Running the version matrix: make each release's environment (cached), build each engine release,
run the scenario library once per cell as `conformance run` in its own process, read its events.

The edge of `conformance versions`: processes and files here, the verdicts in cells.py/matrix.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from conformance.yamlload import safe_load
from conformance.versions.catalogue import EngineRelease, SdkRelease
from conformance.versions.cells import CellResult, read_cell
from conformance.versions.corpus import RECORD_ENV, Recorded, assemble
from conformance.versions.envs import Env, EnvError, cache_root, ensure
from conformance.versions.traced import Trace

PINNED_ENGINES = {"durabletask-go": "v0.14.0", "daprd": "v1.18.2"}  # what .tools/ holds (install scripts)
CELL_TIMEOUT_S = 3 * 3600


@dataclass(frozen=True, kw_only=True)
class Plan:
    sdks: tuple[SdkRelease, ...]
    engines: tuple[EngineRelease, ...]
    scenarios: tuple[str, ...] = ()  # globs (--scenario); empty: the whole library
    jobs: int = 2
    reports: Path = Path("reports/versions")
    corpus: Path | None = None  # also record the history corpus there (corpus.py)


def declared_target(root: Path, worker: str) -> dict:
    """The worker target as its drivers/<sdk>/target.yaml declares it (anchors resolved)."""
    for f in sorted((root / "drivers").glob("*/target.yaml")):
        doc = safe_load(f.read_text(encoding="utf-8")) or {}
        raw = (doc.get("workers") or {}).get(worker)
        if raw and raw.get("command"):
            return dict(raw)
    raise EnvError(f"no worker target {worker!r} with a command in drivers/*/target.yaml")


def declared_command(root: Path, worker: str) -> str:
    return str(declared_target(root, worker)["command"])


def release_target(root: Path, sdk: SdkRelease, env: Env, out: Path) -> tuple[str, Path]:
    """A targets file with the release as a worker target of its own, `<worker>@<version>`: the declared
    target's capabilities and gaps, its command and probe on the cached environment, its version. The
    matrix columns and reproduce lines then name the release."""
    raw = declared_target(root, sdk.worker)
    raw["command"] = env.worker_command(str(raw["command"]))
    if raw.get("probe"):
        raw["probe"] = env.worker_command(str(raw["probe"]))
    raw["version"] = sdk.version
    raw["install"] = f"conformance versions --sdk {sdk.sdk}@{sdk.version}"  # what makes the environment
    raw.pop("installed", None)  # the pin's marker; the cached environment is checked when it is made
    raw.pop("current", None)  # the pin's build check, likewise
    name = f"{sdk.worker}@{sdk.version}"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{sdk.key}.target.yaml"
    path.write_text(yaml.safe_dump({"workers": {name: raw}}, sort_keys=False), encoding="utf-8")
    return name, path


def engine_env(root: Path, engine: EngineRelease, *, log: Callable[[str], None]) -> dict[str, str]:
    """Builds a non-pinned engine release (cached) and returns the environment that points the
    sidecar target at it; the pinned one is the target's own (installed by ./dev)."""
    if engine.engine not in PINNED_ENGINES:
        return {}
    pinned = engine.version == PINNED_ENGINES[engine.engine]
    script = root / engine.install
    var = "DAPR_VERSION" if engine.engine == "daprd" else "DTGO_VERSION"
    log(f"versions: {engine.label}: {engine.install} ({'the pin' if pinned else 'cached build'})")
    done = subprocess.run(["bash", str(script)], cwd=root, capture_output=True, text=True,
                          env={**os.environ, var: engine.version}, timeout=CELL_TIMEOUT_S)
    if done.returncode != 0:
        raise EnvError(f"{engine.install} with {var}={engine.version} failed:\n{(done.stdout + done.stderr)[-2000:]}")
    if pinned:
        return {}
    if engine.engine == "daprd":
        return {"TASKHUB_DAPRD_DIR": str(root / ".tools" / f"daprd-{engine.version}")}
    return {"TASKHUB_DURABLETASK_GO": str(cache_root() / f"durabletask-go-{engine.version}" / "durabletask-go")}


def run_matrix(plan: Plan, *, root: Path, log: Callable[[str], None] = print) -> list[CellResult]:
    results: list[CellResult] = []
    envs: dict[str, Env] = {}
    for engine in plan.engines:
        try:
            extra_env = engine_env(root, engine, log=log)
            engine_error = ""
        except (EnvError, subprocess.TimeoutExpired) as exc:
            extra_env, engine_error = {}, str(exc)
        for sdk in plan.sdks:
            if engine_error:
                results.append(CellResult(sdk=sdk, engine=engine, setup_error=f"engine: {engine_error}"))
                continue
            try:
                env = envs.get(sdk.key) or ensure(sdk, root=root, log=log)
                envs[sdk.key] = env
                worker, targets = release_target(root, sdk, env, plan.reports / "targets")
            except EnvError as exc:
                results.append(CellResult(sdk=sdk, engine=engine, setup_error=str(exc)))
                log(f"versions: {sdk.label}: {exc}")
                continue
            results.append(_run_cell(plan, root=root, sdk=sdk, engine=engine, worker=worker, targets=targets,
                                     env=extra_env, log=log))
    return results


def _run_cell(plan: Plan, *, root: Path, sdk: SdkRelease, engine: EngineRelease, worker: str, targets: Path,
              env: dict[str, str], log: Callable[[str], None]) -> CellResult:
    out = plan.reports / "cells" / f"{sdk.key}@{engine.engine}-{engine.version}"
    argv = [sys.executable, "-m", "conformance", "run", "--sidecar", engine.sidecar, "--worker", worker,
            "--targets", str(targets), "--jobs", str(plan.jobs), "--reports", str(out)]
    for g in plan.scenarios:
        argv += ["--scenario", g]
    log(f"versions: {sdk.label} on {engine.label}: {shlex.join(argv[1:])}")
    began = time.monotonic()
    child_env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    staging = plan.reports / "recorded" / f"{sdk.key}@{engine.engine}-{engine.version}"
    if plan.corpus is not None:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        child_env[RECORD_ENV] = str(staging)
    with open(plan.reports / f"{sdk.key}@{engine.engine}-{engine.version}.log", "w", encoding="utf-8") as fh:
        done = subprocess.run(argv, cwd=root, stdout=fh, stderr=subprocess.STDOUT, env=child_env,
                              timeout=CELL_TIMEOUT_S)
    wall = time.monotonic() - began
    events = out / "events.jsonl"
    if not events.is_file():
        return CellResult(sdk=sdk, engine=engine, wall_s=wall,
                          setup_error=f"the run wrote no events (exit {done.returncode}; log {fh.name})")
    cell = read_cell(events, sdk=sdk, engine=engine, wall_s=wall)
    if plan.corpus is not None and staging.is_dir():
        passed = {s for s, o in cell.outcomes.items() if o == "PASSED"}
        written = assemble(staging, passed=passed, corpus=plan.corpus, recorded=Recorded(
            engine=engine.engine, engine_version=engine.version, sdk=sdk.sdk, sdk_version=sdk.version),
            places={"cache": cache_root(), "root": root, "home": Path.home(), "tmp": Path(tempfile.gettempdir())})
        log(f"versions: {len(written)} histories of {sdk.label} on {engine.label} filed in {plan.corpus}")
    log(f"versions: {sdk.label} on {engine.label}: {cell.counts} in {wall:.0f} s")
    return cell


def write_reports(results: Sequence[CellResult], *, reports: Path, command: str,
                  traces: Sequence[Trace] = ()) -> list[Path]:
    from conformance.versions.matrix import render_markdown, to_json

    reports.mkdir(parents=True, exist_ok=True)
    md, js = reports / "versions.md", reports / "versions.json"
    md.write_text(render_markdown(results, command=command, traces=traces), encoding="utf-8")
    js.write_text(to_json(results, command=command, traces=traces), encoding="utf-8")
    return [md, js]
