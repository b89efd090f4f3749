"""Test vectors: hand-made turns sent to a connected worker, whose answers are handed back, not applied.

This is how turn-level vectors reach a worker under test (the runner's vector scenarios, the
worker fuzzer, `conformance replay`): the history is the vector's, not an instance's, and the
answer is compared, not committed. An engine gets a channel on its first `inject_turn`; one that
never injects has none, and its dispatch and completion paths never see a vector.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable

from taskhub_wire import pb

from fake_sidecar.engine.dispatcher import Dispatcher


@dataclass
class _Vector:
    """One injected turn, queued with the dispatcher as foreign work."""

    token: str
    instance_id: str
    item: pb.WorkItem
    stream: int | None = None
    live: bool = True  # False once its injector stopped waiting: a late claim finds nothing
    response: pb.WorkflowResponse | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def claim(self, sid: int) -> pb.WorkItem | None:
        if not self.live or self.stream is not None:
            return None
        self.stream = sid
        return self.item


class VectorChannel:
    """The injected turns of one engine; `claim_answer` runs under the engine lock."""

    def __init__(self, *, lock: threading.RLock, dispatcher: Dispatcher) -> None:
        self._lock = lock
        self._dispatcher = dispatcher
        self._vectors: dict[str, _Vector] = {}

    def inject(self, *, instance_id: str, past: Iterable[pb.HistoryEvent], new: Iterable[pb.HistoryEvent],
               timeout: float, check_open: Callable[[], None]) -> pb.WorkflowResponse | None:
        """Queue the turn, wait up to `timeout` seconds for a worker's answer and return it (None: none).

        Call without the engine lock: it is taken to queue (after `check_open()`), not to wait.
        """
        token = "vector-" + uuid.uuid4().hex
        item = pb.WorkItem(completionToken=token)
        req = item.workflowRequest
        req.instanceId = instance_id
        req.pastEvents.extend(past)
        req.newEvents.extend(new)
        for ev in list(req.newEvents) + list(req.pastEvents):
            if ev.HasField("executionStarted"):
                req.executionId.CopyFrom(ev.executionStarted.workflowInstance.executionId)
                break
        vec = _Vector(token=token, instance_id=instance_id, item=item)
        with self._lock:
            check_open()
            self._vectors[token] = vec
            self._dispatcher.queue_foreign(vec)
        try:
            vec.done.wait(timeout)
            return vec.response
        finally:
            with self._lock:
                vec.live = False
                self._vectors.pop(token, None)

    def claim_answer(self, resp: pb.WorkflowResponse) -> bool:
        """If `resp` answers an injected turn, keep it for its injector and return True."""
        vec = self._vector_for(resp)
        if vec is None:
            return False
        vec.response = resp
        vec.done.set()
        return True

    def _vector_for(self, resp: pb.WorkflowResponse) -> _Vector | None:
        if resp.completionToken:
            return self._vectors.get(resp.completionToken)
        # Workers without a completion-token field (jsdapr) answer with an empty token.
        return next((v for v in self._vectors.values() if v.instance_id == resp.instanceId and v.stream is not None),
                    None)
