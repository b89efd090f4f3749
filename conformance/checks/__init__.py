"""Checks: plain functions registered by name; each collects every mismatch and raises once.

The registry is explicit: `base` holds what a check reads (`FlowObservation`, `VectorObservation`),
the `check` decorator and `fail`; the modules below hold the checks, and importing this package
imports each of them once, here (no module imports the package back to register itself).
"""

from __future__ import annotations

from conformance.checks.base import (
    ALWAYS, CHECKS, REGISTRY, Check, CheckFn, FlowObservation, Observation, Observed, VectorObservation, check, fail,
    resolve_instance, run_check,
)
from conformance.checks import expectations, history, ledger, replay, signing  # noqa: E402,F401  (the check modules)

__all__ = ["ALWAYS", "CHECKS", "REGISTRY", "Check", "CheckFn", "FlowObservation", "Observation", "Observed",
           "VectorObservation", "check", "fail", "resolve_instance", "run_check"]
