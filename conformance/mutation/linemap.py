"""Which scenarios reach which line of the executor: the scenario library run once on the SDK's
unmutated copy, each scenario's driver processes under coverage.py with a data file of their own.

The run is also the baseline: only scenarios that PASSED on the unmutated SDK can kill a mutant.
"""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from conformance.mutation.environment import Environment
from conformance.mutation.sdks import Scope

# Reads every data file of one folder with the copy's coverage.py (the harness does not import it) and
# prints {data file name: {relpath: [lines]}}.
_DUMP = """
import json, pathlib, sys, coverage
folder, site, rels = pathlib.Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
out = {}
for f in sorted(folder.iterdir()):
    if not f.name.startswith("s"): continue
    data = coverage.CoverageData(basename=str(f)); data.read()
    lines = {}
    for rel in rels:
        got = data.lines(site + "/" + rel)
        if got: lines[rel] = sorted(got)
    out[f.name] = lines
print(json.dumps(out))
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Baseline:
    outcome: str  # the scenario's Outcome value on the unmutated SDK
    duration_s: float
    lines: dict[str, frozenset[int]]  # relpath -> executed lines


def worker_command(env: Environment, *, command: str, prefix: str = "") -> str:
    """The target's command with the cached install's python replaced by the copy's (and `prefix`
    after it, e.g. `-m coverage run ...`)."""
    installed = f"{{root}}/.sdk/{env.spec.venv}/bin/python"
    if not command.startswith(installed):
        raise ValueError(f"{env.spec.name}: its command does not start with {installed}: {command!r}")
    return shlex.join([str(env.python)]) + (f" {prefix}" if prefix else "") + command[len(installed):]


def statement_lines(source: str) -> dict[int, int]:
    """Each line -> the first line of the innermost statement holding it (coverage.py records that line)."""
    out: dict[int, int] = {}
    stmts = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt)]
    for node in sorted(stmts, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, reverse=True):
        body_start = min((c.lineno for f in ("body", "orelse", "finalbody", "handlers")
                          for c in getattr(node, f, []) or [] if hasattr(c, "lineno")), default=None)
        last = (body_start - 1) if body_start else (node.end_lineno or node.lineno)
        for line in range(node.lineno, max(last, node.lineno) + 1):
            out[line] = node.lineno
    return out


def build(env: Environment, *, scopes: tuple[Scope, ...], globs: tuple[str, ...], jobs: int,
          folder: Path, known: frozenset[str] = frozenset()) -> dict[str, Baseline]:
    """Run the selected scenarios once under coverage; the baseline of each, with its lines. Scenarios
    in `known` (mapped before) are not run again, so a scenario added to the library costs its own run."""
    from conformance.run_options import RunOptions, prepare_run
    from conformance.runner import Plan, run_plan
    from conformance.targets.external import start_command_worker
    from conformance.targets.registry import DEFAULT_TARGETS, load_targets

    target = load_targets(DEFAULT_TARGETS).workers[env.spec.name]
    covdir = folder / "coverage"
    shutil.rmtree(covdir, ignore_errors=True)
    covdir.mkdir(parents=True)
    rc = folder / "coveragerc"
    include = ",".join(str(env.site / s.relpath) for s in scopes)
    # sigterm: the drivers are stopped with SIGTERM; parallel: a scenario may start several driver processes.
    rc.write_text(f"[run]\nparallel = True\nsigterm = True\ninclude = {include}\n", encoding="utf-8")
    plain = worker_command(env, command=target.command)
    prepared = prepare_run(RunOptions(worker=(env.spec.name,), worker_command=plain, scenario=globs,
                                      no_reports=True, jobs=jobs))
    plan = Plan.build([s for s in prepared.scenarios if s.id not in known], prepared.pairs)
    if not plan.items:
        return {}
    items = []
    for index, (scenario, pair) in enumerate(plan.items):
        command = worker_command(env, command=target.command,
                                 prefix=f"-m coverage run --rcfile={shlex.quote(str(rc))} "
                                        f"--data-file={shlex.quote(str(covdir / f's{index}'))}")
        worker = replace(pair.worker, command=command,
                         starter=partial(start_command_worker, name=env.spec.name, command=command))
        items.append((scenario, replace(pair, worker=worker)))
    results = run_plan(Plan(items=tuple(items)), sinks=[], jobs=jobs, command="conformance mutate (line map)")
    dump = subprocess.run([str(env.python), "-c", _DUMP, str(covdir), str(env.site),
                           json.dumps([s.relpath for s in scopes])], capture_output=True, text=True, check=False)
    if dump.returncode != 0:
        raise RuntimeError(f"reading the coverage data in {covdir} failed:\n{dump.stderr[-2000:]}")
    per_file: dict[str, dict[str, list[int]]] = json.loads(dump.stdout)
    out: dict[str, Baseline] = {}
    for index, ((scenario, _), result) in enumerate(zip(items, results, strict=True)):
        lines: dict[str, set[int]] = {}
        for name, got in per_file.items():
            if name == f"s{index}" or name.startswith(f"s{index}."):
                for rel, ls in got.items():
                    lines.setdefault(rel, set()).update(ls)
        out[scenario.id] = Baseline(outcome=result.outcome.value, duration_s=round(result.duration_s, 2),
                                    lines={rel: frozenset(ls) for rel, ls in lines.items()})
    return out


def save(baselines: dict[str, Baseline], path: Path, *, meta: dict[str, Any]) -> None:
    doc = {**meta, "scenarios": {sid: {"outcome": b.outcome, "duration_s": b.duration_s,
                                       "lines": {rel: sorted(ls) for rel, ls in sorted(b.lines.items())}}
                                 for sid, b in sorted(baselines.items())}}
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")


def load(path: Path) -> tuple[dict[str, Any], dict[str, Baseline]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    scenarios = doc.pop("scenarios")
    return doc, {sid: Baseline(outcome=v["outcome"], duration_s=v["duration_s"],
                               lines={rel: frozenset(ls) for rel, ls in v["lines"].items()})
                 for sid, v in scenarios.items()}
