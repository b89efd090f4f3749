"""Durable store for the engine: SQLite (WAL) or nothing at all (memory).

The engine keeps its state in memory and writes every change through a `Tx`,
applied in one SQLite transaction. On start it reloads the state, so a kill -9
at any moment loses nothing and applies nothing twice: a turn is either
committed with its inbox deletions or not at all. Histories are read per
instance on first use, so a restart costs one query per table, not per event.
A write that fails raises `StoreFailed` having written nothing.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from fake_sidecar.engine.errors import EngineError, StoreFailed, StoreFull

SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (iid TEXT PRIMARY KEY, meta TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS history (iid TEXT NOT NULL, idx INTEGER NOT NULL, ev BLOB NOT NULL,
    PRIMARY KEY (iid, idx));
CREATE TABLE IF NOT EXISTS inbox (iid TEXT NOT NULL, seq INTEGER NOT NULL, visible_at INTEGER NOT NULL,
    gen INTEGER NOT NULL, ev BLOB NOT NULL, PRIMARY KEY (iid, seq));
CREATE TABLE IF NOT EXISTS activities (iid TEXT NOT NULL, task_id INTEGER NOT NULL, gen INTEGER NOT NULL,
    req BLOB NOT NULL, PRIMARY KEY (iid, task_id));
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass
class Tx:
    """The changes of one engine step, applied atomically."""

    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    history_append: list[tuple[str, int, bytes]] = field(default_factory=list)
    history_clear: set[str] = field(default_factory=set)
    inbox_add: list[tuple[str, int, int, int, bytes]] = field(default_factory=list)
    inbox_delete: list[tuple[str, int]] = field(default_factory=list)
    activity_put: list[tuple[str, int, int, bytes]] = field(default_factory=list)
    activity_delete: list[tuple[str, int]] = field(default_factory=list)
    drop: set[str] = field(default_factory=set)
    counters: dict[str, int] = field(default_factory=dict)

    def touched(self) -> set[str]:
        """Every instance id this transaction writes."""
        return (set(self.instances) | {r[0] for r in self.history_append} | self.history_clear
                | {r[0] for r in self.inbox_add} | {r[0] for r in self.inbox_delete}
                | {r[0] for r in self.activity_put} | {r[0] for r in self.activity_delete} | self.drop)

    def empty(self) -> bool:
        return not (self.instances or self.history_append or self.history_clear or self.inbox_add
                    or self.inbox_delete or self.activity_put or self.activity_delete or self.drop
                    or self.counters)


@dataclass(frozen=True)
class LoadedInstance:
    """One instance as stored; its history is read later, on first use (`load_history`)."""

    iid: str
    meta: dict[str, Any]
    inbox: list[tuple[int, int, int, bytes]]  # seq, visible_at, gen, ev
    activities: list[tuple[int, int, bytes]]  # task_id, gen, req


class MemoryStore:
    """A store that keeps nothing: state lives only in the engine's memory."""

    durable = False

    def apply(self, tx: Tx) -> None:
        return None

    def load(self, iids: Iterable[str] | None = None) -> tuple[list[LoadedInstance], dict[str, int]]:
        return [], {}

    def load_history(self, iid: str) -> list[bytes]:
        return []

    def close(self) -> None:
        return None


# SQLite's primary result code for "database or disk is full" (also hit at PRAGMA max_page_count).
_SQLITE_FULL = 13


class SqliteStore:
    durable = True

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against process death (kill -9); only power loss could cost
            # the last transactions, which a test simulator does not need to survive.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the sidecar database {path}: {exc}; "
                             "pass another --db path or ':memory:'") from exc

    def apply(self, tx: Tx) -> None:
        """Write `tx` in one transaction, or raise `StoreFailed` having written nothing of it."""
        if tx.empty():
            return
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            self._write(tx)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise _write_failure(self.path, exc) from exc
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        # On SQLITE_FULL (and I/O errors) SQLite may have rolled back already: a second
        # ROLLBACK would fail and hide the real error.
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the transaction is gone either way; the original error is what matters

    def _write(self, tx: Tx) -> None:
        db = self._db
        for iid in tx.drop:
            for table in ("instances", "history", "inbox", "activities"):
                db.execute(f"DELETE FROM {table} WHERE iid = ?", (iid,))
        for iid in tx.history_clear:
            db.execute("DELETE FROM history WHERE iid = ?", (iid,))
        if tx.history_append:
            db.executemany("INSERT OR REPLACE INTO history (iid, idx, ev) VALUES (?, ?, ?)", tx.history_append)
        if tx.inbox_delete:
            db.executemany("DELETE FROM inbox WHERE iid = ? AND seq = ?", tx.inbox_delete)
        if tx.inbox_add:
            db.executemany("INSERT OR REPLACE INTO inbox (iid, seq, visible_at, gen, ev) "
                           "VALUES (?, ?, ?, ?, ?)", tx.inbox_add)
        if tx.activity_delete:
            db.executemany("DELETE FROM activities WHERE iid = ? AND task_id = ?", tx.activity_delete)
        if tx.activity_put:
            db.executemany("INSERT OR REPLACE INTO activities (iid, task_id, gen, req) "
                           "VALUES (?, ?, ?, ?)", tx.activity_put)
        if tx.instances:
            db.executemany("INSERT OR REPLACE INTO instances (iid, meta) VALUES (?, ?)",
                           [(iid, json.dumps(meta)) for iid, meta in tx.instances.items()])
        if tx.counters:
            db.executemany("INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)",
                           list(tx.counters.items()))

    def load(self, iids: Iterable[str] | None = None) -> tuple[list[LoadedInstance], dict[str, int]]:
        """Every instance (or those of `iids`) without history: one query per table, not per instance."""
        try:
            return self._load(None if iids is None else sorted(set(iids)))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the sidecar database {self.path}: {exc}; "
                             "restore it from a backup or start with another --db") from exc

    def _load(self, iids: list[str] | None) -> tuple[list[LoadedInstance], dict[str, int]]:
        db = self._db
        where, args = "", ()
        if iids is not None:
            if not iids:
                return [], {}
            where, args = f" WHERE iid IN ({', '.join('?' * len(iids))})", tuple(iids)
        inbox: dict[str, list[tuple[int, int, int, bytes]]] = {}
        for iid, seq, vis, gen, ev in db.execute(
                f"SELECT iid, seq, visible_at, gen, ev FROM inbox{where} ORDER BY iid, seq", args):
            inbox.setdefault(iid, []).append((seq, vis, gen, ev))
        acts: dict[str, list[tuple[int, int, bytes]]] = {}
        for iid, task_id, gen, req in db.execute(
                f"SELECT iid, task_id, gen, req FROM activities{where} ORDER BY iid, task_id", args):
            acts.setdefault(iid, []).append((task_id, gen, req))
        loaded = [
            LoadedInstance(iid=iid, meta=_meta(self.path, iid, meta), inbox=inbox.get(iid, []),
                           activities=acts.get(iid, []))
            for iid, meta in db.execute(f"SELECT iid, meta FROM instances{where}", args)
        ]
        counters = dict(db.execute("SELECT name, value FROM counters"))
        return loaded, counters

    def load_history(self, iid: str) -> list[bytes]:
        try:
            return [ev for (ev,) in self._db.execute("SELECT ev FROM history WHERE iid = ? ORDER BY idx", (iid,))]
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the history of workflow instance '{iid}' from {self.path}: {exc}; "
                             "restore the database from a backup") from exc

    def close(self) -> None:
        self._db.close()


# What a stored meta value must hold (written by Instance.meta()); `continuing` came later.
META_KEYS = ("seq", "name", "generation", "execution_id", "created_ns", "last_updated_ns", "custom_status",
             "stalled", "parent")


def _meta(path: Path, iid: str, raw: str) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise StoreError(damaged(path, iid, f"its meta value is not JSON ({exc})")) from None
    if not isinstance(meta, dict):
        raise StoreError(damaged(path, iid, f"its meta value is {type(meta).__name__}, not an object"))
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise StoreError(damaged(path, iid, f"its meta value lacks {', '.join(missing)}"))
    return meta


def damaged(path: Path | str, iid: str, what: str) -> str:
    """The one wording for a damaged row: where it is and what to do."""
    return (f"the sidecar database {path} is damaged: workflow instance '{iid}': {what}; "
            "restore the database from a backup, or delete that instance's rows "
            f"(instances, history, inbox, activities WHERE iid = '{iid}')")


def _write_failure(path: Path, exc: sqlite3.Error) -> StoreFailed:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == _SQLITE_FULL:
        return StoreFull(f"the sidecar database {path} is full ({exc}); nothing of this request was applied. "
                         "Free disk space (or move --db to a larger disk) and retry")
    return StoreFailed(f"the sidecar database {path} refused the write ({exc}); nothing of this request was "
                       "applied; retry, or check the disk and the database file")


class StoreError(EngineError):
    """The database could not be opened or read, or a row of it is damaged."""

    code = "DATA_LOSS"


def open_store(db: str) -> MemoryStore | SqliteStore:
    """`:memory:` keeps nothing; anything else is a SQLite file path."""
    if db == ":memory:":
        return MemoryStore()
    path = Path(db)
    if path.parent and not path.parent.exists():
        raise StoreError(f"the directory of --db {db} does not exist; create it or pass another path")
    return SqliteStore(path)
