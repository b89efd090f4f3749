"""Wire schema of the Durable Task / Dapr Workflow protocol, one proto package per dialect.

``pb`` is the Dapr dialect of ``TaskHubSidecarService`` and ``rt`` the workflow subset of the
Dapr runtime API. Both are generated from our own .proto files (``python -m
taskhub_wire.generate``); ``taskhub_wire.rpc`` maps them onto the upstream method paths.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskhub_wire.dapr import taskhub_pb2 as pb
    from taskhub_wire.daprrt import workflow_pb2 as rt

# The upstream revision each dialect's schema matches (per taskhub_wire/<dialect>/*.proto).
UPSTREAM: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "dapr": MappingProxyType(
            {
                "proto": "taskhub_wire/dapr/taskhub.proto",
                "package": "taskhub.dapr.v1",
                "service": "TaskHubSidecarService",
                "matches": "dapr/durabletask-go@4028a08 api/protos (dapr/durabletask-protobuf@f31a2a05)",
            }
        ),
        "daprrt": MappingProxyType(
            {
                "proto": "taskhub_wire/daprrt/workflow.proto",
                "package": "taskhub.daprrt.v1",
                "service": "dapr.proto.runtime.v1.Dapr",
                "matches": "dapr 1.18.3 (PyPI): dapr/proto/runtime/v1/workflow.proto and dapr.proto",
            }
        ),
    }
)

__all__ = ["UPSTREAM", "pb", "rt"]

# Loaded on first use, so that `python -m taskhub_wire.generate` still runs when a generated
# module is missing or stale and cannot be imported.
_LAZY = {"pb": "taskhub_wire.dapr.taskhub_pb2", "rt": "taskhub_wire.daprrt.workflow_pb2"}


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'taskhub_wire' has no attribute {name!r}")
