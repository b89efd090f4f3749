"""A checkout's environment made or brought up to date, and the worker command that runs it (`prepare`).

Apart from conformance/targets/checkout.py (what a checkout is, and the Python, JS and Go builds) so that
the Java build (checkout_java.py), which uses that module, is reached from here without a cycle.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.targets.checkout import (_PYTHON_SDK_WORKERS, Checkout, CheckoutError, _base_python, _go_binary,
                                          _js_env, _python_env, _revision)
from conformance.targets.checkout_java import java_launcher
from conformance.targets.sources import Build, BuildStep


@dataclass(frozen=True, kw_only=True)
class Prepared:
    checkout: Checkout
    command: str  # the worker target's command with the SDK of the checkout
    created: bool  # the environment was (re)created by this call
    step: BuildStep  # what this call built
    seconds: float
    revision: str  # git describe of the checkout, "+dirty" when it has uncommitted changes

    def describe(self) -> str:
        how = (f"created in {self.seconds:.0f} s" if self.created else f"prepared in {self.seconds:.1f} s") + \
            f"; build step: {self.step.describe()}"
        return (f"SDK under test: {self.checkout.worker} from {self.checkout.root} ({self.checkout.layout}"
                f"{', ' + self.revision if self.revision else ''}); environment {self.checkout.env_dir} ({how})")


def prepare(c: Checkout, *, command: str, root: Path, tools: Path | None = None,
            python: str | None = None) -> Prepared:
    """Make (or bring up to date) the checkout's environment; the worker's `command` with it in place of the pin."""
    began = time.monotonic()
    words = shlex.split(command)
    if c.worker in (*_PYTHON_SDK_WORKERS, "durabletask-dapr"):
        py, created = _python_env(c, python=python or _base_python())
        words[0] = str(py)
        # An editable install: the next run sees an edit with nothing built.
        step = BuildStep(build=Build.FULL, tool="pip install -e") if created else BuildStep(build=Build.UP_TO_DATE,
                                                                                            tool="")
    elif c.worker == "durabletask-js":
        driver = root / "drivers" / "durabletask_js"
        copy, created, step = _js_env(c, driver=driver)
        words = [w.replace("{root}/drivers/durabletask_js", str(copy)) for w in words]
    elif c.worker == "durabletask-go-worker":
        binary, created, step = _go_binary(c, driver=root / "drivers" / "durabletask_go", tools=tools or root / ".tools")
        words[0] = str(binary)
    elif c.worker == "durabletask-java":
        launcher, created, step = java_launcher(c, project=root / "drivers" / "durabletask_java",
                                          tools=tools or root / ".tools")
        words[0] = str(launcher)
    else:  # pragma: no cover - detect() only returns the workers above
        raise CheckoutError(f"no local build for {c.worker}")
    return Prepared(checkout=c, command=shlex.join(words), created=created, step=step, seconds=time.monotonic() - began,
                    revision=_revision(c.root))
