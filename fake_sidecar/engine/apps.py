"""One app's view of an engine that hosts several (R11.1, R11.6).

daprd keeps each app's workflows under that app's actor types, so a management call made through
app A's sidecar does not see an instance that app B hosts (orchestrator/state.go reads the actor
state of A's workflow actor type; a child that B runs is "not found" there). `AppScope` gives each
listening address that view: the same engine, its instances filtered by app, new instances and
worker streams tagged with the app.
"""

from __future__ import annotations

from typing import Any, Callable

from taskhub_wire import pb

from fake_sidecar.engine import errors
from fake_sidecar.engine.core import Engine
from fake_sidecar.engine.model import InstanceView


class AppScope:
    """The engine as app `key` sees it ("" is the default app); everything else is the engine's."""

    def __init__(self, engine: Engine, key: str) -> None:
        self._engine = engine
        self.key = key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def _foreign(self, iid: str) -> bool:
        with self._engine.lock:
            inst = self._engine.table.find(iid)
            return inst is not None and inst.app != self.key

    def _refuse_foreign(self, iid: str) -> None:
        if self._foreign(iid):
            raise errors.NotFound(f"no such instance exists: workflow instance '{iid}' not found")

    def start_instance(self, **kw: Any) -> str:
        iid = kw.get("instance_id") or ""
        if iid and self._foreign(iid):
            # One store holds every app's instances: an id another app holds is taken here (daprd
            # would keep both, one per app's actor type; engine-rules R11.6 REF).
            raise errors.AlreadyExists(f"workflow instance id '{iid}' is held by another app of this sidecar")
        return self._engine.start_instance(**kw, app=self.key)

    def get_instance(self, iid: str) -> InstanceView | None:
        return None if self._foreign(iid) else self._engine.get_instance(iid)

    def wait(self, iid: str, pred: Callable[[InstanceView], bool], **kw: Any) -> InstanceView | None:
        return self._engine.wait(iid, lambda v: not self._foreign(iid) and pred(v), **kw)

    def raise_event(self, *, iid: str, **kw: Any) -> None:
        self._refuse_foreign(iid)
        self._engine.raise_event(iid=iid, **kw)

    def terminate(self, *, iid: str, **kw: Any) -> None:
        self._refuse_foreign(iid)
        self._engine.terminate(iid=iid, **kw)

    def suspend(self, *, iid: str, **kw: Any) -> None:
        self._refuse_foreign(iid)
        self._engine.suspend(iid=iid, **kw)

    def resume(self, *, iid: str, **kw: Any) -> bool:
        self._refuse_foreign(iid)
        return self._engine.resume(iid=iid, **kw)

    def purge(self, *, iid: str, **kw: Any) -> int:
        self._refuse_foreign(iid)
        return self._engine.purge(iid=iid, **kw)

    def history(self, iid: str) -> list[pb.HistoryEvent]:
        self._refuse_foreign(iid)
        return self._engine.history(iid)

    def rerun(self, *, source: str, **kw: Any) -> str:
        self._refuse_foreign(source)
        return self._engine.rerun(source=source, **kw)

    def list_instance_ids(self, *, page_size: int, token: str | None) -> tuple[list[str], str | None]:
        ids, next_token = self._engine.list_instance_ids(page_size=page_size, token=token)
        return [i for i in ids if not self._foreign(i)], next_token

    def open_stream(self, *, stateful: bool = False) -> int:
        return self._engine.open_stream(stateful=stateful, app=self.key)
