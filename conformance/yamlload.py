"""YAML data read with libyaml's parser when PyYAML was built with it, else PyYAML's own.

Every run reads the requirement catalogue and the target files before its first scenario (and each
worker process of a run again): libyaml's loader reads them several times faster than the pure-Python
one, which was a large part of the harness's start-up on a loaded machine. Both load the same data and
raise yaml.YAMLError subclasses with line marks. (Scenario files have their own loader, which bounds
nesting: conformance/scenario/source.py.)
"""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """As yaml.safe_load."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a safe loader


__all__ = ["SafeLoader", "safe_load"]
