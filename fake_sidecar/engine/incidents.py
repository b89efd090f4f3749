"""The engine's record of what it refused, redelivered or dropped, per instance (taskhub_core.incidents).

Kept beside the counters: the harness reads it through the reference sidecar target after a scenario
(conformance/targets/reference.py), so a failed scenario's text names the root cause its log holds.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from taskhub_core.incidents import Incident

_PER_INSTANCE = 50  # distinct incidents kept per instance; a repeat in a row only counts


class IncidentLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_instance: dict[str, list[Incident]] = {}

    def record(self, incident: Incident) -> None:
        with self._lock:
            kept = self._by_instance.setdefault(incident.instance, [])
            last = kept[-1] if kept else None
            if last is not None and (last.kind, last.text, last.action) == (incident.kind, incident.text,
                                                                           incident.action):
                kept[-1] = replace(last, count=last.count + 1)
            elif len(kept) < _PER_INSTANCE:
                kept.append(incident)

    def snapshot(self) -> dict[str, tuple[Incident, ...]]:
        with self._lock:
            return {iid: tuple(found) for iid, found in self._by_instance.items()}


__all__ = ["IncidentLog"]
