"""Protocol-aware, fault-injecting gRPC proxy between a worker and a sidecar (docs/design.md §6).

    proxy = FaultProxy.start(upstream=sidecar.address, rules=parse_rules(data, source="x.yaml"))
    worker connects to proxy.address
    ... proxy.transcript(), proxy.fault_log(), proxy.cut_streams(), proxy.replay_pending()
    proxy.stop()

Rules (``FaultRule`` / ``MessageMatch``) match messages by RPC, direction and decoded content and
drop, duplicate, delay, replay later (a zombie) or cut the worker's stream; see ``rules.py`` for
matching and ``server.py`` for what each action does in each direction.
"""

from conformance.proxy.rules import ACTIONS, DIRECTIONS, FaultRule, MessageMatch, parse_rules
from conformance.proxy.server import CUT_DETAILS, DROPPED_RESPONSE_DETAILS, FaultEvent, FaultProxy

__all__ = [
    "ACTIONS",
    "CUT_DETAILS",
    "DIRECTIONS",
    "DROPPED_RESPONSE_DETAILS",
    "FaultEvent",
    "FaultProxy",
    "FaultRule",
    "MessageMatch",
    "parse_rules",
]
