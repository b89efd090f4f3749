"""The workflow program language, shared by the reference worker, the harness and every SDK driver.

Below `fake_worker` and `conformance` (docs/design.md §2); it imports nothing of this project but
the standard library (the Python SDK drivers import it into processes that must not load our
generated protobuf modules). docs/programs.md describes the language.
"""

from taskhub_programs.canonical import canonical_bundle, canonical_form
from taskhub_programs.expressions import (
    OPERATORS, ExpressionError, canonical_expr, compile_expr, compile_node, evaluate, number_text, text, truthy,
)
from taskhub_programs.language import (
    BUILTIN_ACTIVITIES, All, AnyOf, Bundle, CallActivity, CallChild, ContinueAsNew, Fail, If, IfPatched, Program,
    ProgramError, ProgramFamily, Retry, Return, STEP_NAMES, SetStatus, SetVar, Spawn, Step, Task, Timer, WaitEvent,
    load_bundle, parse_bundle, parse_duration, walk_steps,
)

__all__ = [
    "BUILTIN_ACTIVITIES", "OPERATORS", "All", "AnyOf", "Bundle", "CallActivity", "CallChild", "ContinueAsNew",
    "ExpressionError", "Fail", "If", "IfPatched", "Program", "ProgramError", "ProgramFamily", "Retry", "Return",
    "STEP_NAMES", "SetStatus", "SetVar", "Spawn", "Step", "Task", "Timer", "WaitEvent", "canonical_bundle", "canonical_expr", "canonical_form", "compile_expr", "compile_node",
    "evaluate", "number_text", "load_bundle", "parse_bundle", "parse_duration", "text", "truthy", "walk_steps",
]
