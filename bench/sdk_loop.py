"""An SDK author's loop, edit to verdict, on a local checkout: today's (`conformance run --sdk-path`, the
environment made once in the user cache and following the checkout) beside the one before it (the install
script's `--sdk-path`, which recreated the SDK's environment, or rebuilt the driver, on every run, then
`--worker-command`), in one run, as a ratio.

Each round "edits" the checkout (appends a comment to one of its source files, removed afterwards), then
times each loop from the command to the verdict on the same selection of scenarios. The first round of
today's loop may create the environment (reported apart as cold); the rounds after are warm. Also timed:
the whole library on the checkout, warm (--library).

    .venv/bin/python bench/sdk_loop.py --sdk-path ~/src/python-sdk [--area events] [--rounds 2] [--library]
    .venv/bin/python bench/sdk_loop.py --sdk-path ~/src/durabletask-js --baseline ~/src/taskhub-conformance@main

--baseline DIR: "before" is another checkout of this suite (e.g. the main branch) running the same
`conformance run --sdk-path` loop, instead of the install script, with an environment of its own (its first
round may create it: read the rounds after).

Goals (issue 22): warm edit to verdict <= 60 s for a Python SDK, <= 90 s for JS, Go and Java (build
included); the whole library <= 3 minutes. Say the machine's load with the figures (printed here).
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conformance.targets.checkout import CACHE_ENV, cache_root, detect  # noqa: E402

GOALS = {"dapr-ext-workflow": 60, "dapr": 60, "durabletask-dapr": 60}  # others: 90
# The loop before: the install script with --sdk-path and the command it installed (none for Java).
BEFORE = {
    "dapr-ext-workflow": ("scripts/install-sdks.sh dx --sdk-path {ext}",
                          "{root}/.sdk/dx-custom/bin/python {root}/drivers/dapr_ext_workflow/driver.py "
                          "--sidecar {address} --programs {programs}"),
    "durabletask-dapr": ("scripts/install-sdks.sh dd --sdk-path {path}",
                         "{root}/.sdk/dd-custom/bin/python {root}/drivers/durabletask_dapr/driver.py "
                         "--sidecar {address} --programs {programs}"),
    "durabletask-go-worker": ("scripts/install-go-driver.sh --sdk-path {path}",
                              "{root}/.tools/custom/durabletask-go-driver --sidecar {address} --canonical {canonical}"),
    "durabletask-js": ("scripts/install-js.sh --sdk-path {path}",
                       "node {root}/.sdk/js-custom/driver.js --sidecar {address} --canonical {canonical}"),
}
EDITED = {"dapr-ext-workflow": "ext/dapr-ext-workflow/dapr/ext/workflow/__init__.py",
          "dapr": "dapr/ext/workflow/__init__.py",
          "durabletask-dapr": "durabletask/__init__.py", "durabletask-go-worker": "task/orchestrator.go",
          "durabletask-js": "src/index.ts", "durabletask-java": "client/src/main/java/io/dapr/durabletask/Task.java"}
CPU: list[float] = []  # the CPU seconds of each timed() call, in order
COMMENT = {".py": "# sdk_loop bench edit\n", ".go": "// sdk_loop bench edit\n", ".ts": "// sdk_loop bench edit\n",
           ".java": "// sdk_loop bench edit\n"}


def timed(argv: list[str], *, log: Path, cwd: Path = ROOT, extra_env: dict[str, str] | None = None) -> tuple[float, int]:
    """(wall seconds, exit status or -1 without a verdict); the CPU seconds it used go to `CPU` (a loaded
    machine stretches the wall time, not the CPU time: CPU / cores is the wall time on an idle machine)."""
    began = time.monotonic()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "ab") as out:
        out.write(f"\n$ {shlex.join(argv)}\n".encode())
        out.flush()
        env = {**os.environ, "PYTHONPATH": str(cwd), **(extra_env or {})}  # the suite of `cwd` (this one, or --baseline)
        start = out.tell()
        rc = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
    with open(log, "rb") as back:  # a run that printed no verdict (a traceback, a broken build) is no loop time
        back.seek(start)
        verdict = b" finished in " in back.read() or argv[0].endswith(".sh")
    return time.monotonic() - began, rc if verdict else -1


def edit(path: Path, *, mark: str) -> bytes:
    """Append a comment unlike any earlier round's (a repeated edit could find its build already made)."""
    before = path.read_bytes()
    path.write_bytes(before + COMMENT.get(path.suffix, "\n").replace("edit", f"edit {mark}").encode())
    return before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdk-path", type=Path, required=True)
    ap.add_argument("--worker", default=None)
    ap.add_argument("--area", default="events", help="the selection both loops run (default: events)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--library", action="store_true", help="also time the whole library on the checkout (warm)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a checkout of this suite whose `conformance run --sdk-path` is the loop before")
    ap.add_argument("--no-before", action="store_true", help="time today's loop alone")
    ap.add_argument("--log", type=Path, default=Path("/tmp") / "sdk_loop.log")
    args = ap.parse_args()

    c = detect(args.sdk_path, worker=args.worker)
    python = [sys.executable, "-m", "conformance", "run"]
    select = ["--area", args.area, "--jobs", str(args.jobs), "--no-reports"]
    now = [*python, "--sdk-path", str(c.root), "--worker", c.worker, *select]
    edited = c.root / EDITED[c.worker]
    if not edited.is_file() and c.worker == "durabletask-java":  # java-sdk's module, not durabletask-java's
        edited = c.root / "durabletask-client" / EDITED[c.worker].removeprefix("client/")
    elif not edited.is_file():  # either python-sdk layout under either target
        edited = c.root / EDITED["dapr" if c.worker == "dapr-ext-workflow" else "dapr-ext-workflow"]
    print(f"sdk_loop: {c.worker} from {c.root} ({c.layout}); selection --area {args.area}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; log {args.log}")
    cold = not c.env_dir.exists()
    # The baseline's environment lives in a cache of its own (below): its first round may create it.
    cold_before = not (cache_root() / "bench-baseline" / c.env_dir.relative_to(cache_root())).exists()
    rows: list[tuple[str, float, int]] = []
    for n in range(args.rounds):
        before_bytes = edit(edited, mark=f"{os.getpid()}-{n}")
        try:
            seconds, rc = timed(now, log=args.log)
            rows.append((f"today  round {n + 1}{' (cold: creates the environment)' if cold and n == 0 else ''}"
                         f" [cpu {CPU[-1]:.0f} s]", seconds, rc))
            if args.baseline is not None:
                # Its own cache: a stamp of either suite must not send the other to recreate the environment.
                t0, rc0 = timed(now, log=args.log, cwd=args.baseline.resolve(),
                                extra_env={CACHE_ENV: str(cache_root() / "bench-baseline")})
                rows.append((f"before round {n + 1} ({args.baseline.name})"
                             f"{' (cold: creates the environment)' if cold_before and n == 0 else ''}"
                             f" [cpu {CPU[-1]:.0f} s]", t0, rc0))
            elif c.worker in BEFORE and not args.no_before:
                install, command = BEFORE[c.worker]
                ext = c.root / "ext" / "dapr-ext-workflow"
                install_argv = shlex.split(install.format(path=c.root, ext=ext))
                t1, rc1 = timed([str(ROOT / install_argv[0]), *install_argv[1:]], log=args.log)
                t2, rc2 = timed([*python, "--worker", c.worker, "--worker-command", command, *select], log=args.log)
                rows.append((f"before round {n + 1} (install {t1:.0f} s + run {t2:.0f} s)", t1 + t2, rc1 or rc2))
        finally:
            edited.write_bytes(before_bytes)
    for label, seconds, rc in rows:
        print(f"  {label:<58} {seconds:7.1f} s   exit {rc}")
    # A round without a verdict (exit -1 above: a broken build, a suite that does not import) is no loop time.
    warm = [s for label, s, rc in rows if label.startswith("today") and "cold" not in label and rc >= 0]
    old = [s for label, s, rc in rows if label.startswith("before") and "cold" not in label and rc >= 0]
    goal = GOALS.get(c.worker, 90)
    if warm:
        print(f"today, warm edit to verdict: median {statistics.median(warm):.1f} s, best {min(warm):.1f} s over "
              f"{len(warm)} round(s) (goal <= {goal} s)")
    if warm and old:
        print(f"before / today (warm, medians): {statistics.median(old):.1f} s / {statistics.median(warm):.1f} s = "
              f"{statistics.median(old) / statistics.median(warm):.2f}x")
    print(f"load average at the end {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[2]:.1f} (15 min)")
    if args.library:
        seconds, rc = timed([*python, "--sdk-path", str(c.root), "--worker", c.worker, "--jobs", str(args.jobs),
                             "--no-reports"], log=args.log)
        print(f"whole library on the checkout, warm: {seconds:.1f} s, exit {rc} (goal <= 180 s); CPU {CPU[-1]:.0f} s, "
              f"so at least {CPU[-1] / (os.cpu_count() or 1):.0f} s on {os.cpu_count()} idle cores; load average "
              f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
