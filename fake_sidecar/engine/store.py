"""Durable store for the engine: SQLite (WAL) or nothing at all (memory).

The engine keeps its whole state in memory and writes every change through a
`Tx`, applied in one SQLite transaction. On start it reloads the state, so a
kill -9 at any moment loses nothing and applies nothing twice: a turn is either
committed with its inbox deletions or not at all.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def empty(self) -> bool:
        return not (self.instances or self.history_append or self.history_clear or self.inbox_add
                    or self.inbox_delete or self.activity_put or self.activity_delete or self.drop
                    or self.counters)


@dataclass(frozen=True)
class LoadedInstance:
    iid: str
    meta: dict[str, Any]
    history: list[bytes]
    inbox: list[tuple[int, int, int, bytes]]  # seq, visible_at, gen, ev
    activities: list[tuple[int, int, bytes]]  # task_id, gen, req


class MemoryStore:
    """A store that keeps nothing: state lives only in the engine's memory."""

    durable = False

    def apply(self, tx: Tx) -> None:
        return None

    def load(self) -> tuple[list[LoadedInstance], dict[str, int]]:
        return [], {}

    def close(self) -> None:
        return None


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
        if tx.empty():
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for iid in tx.drop:
                for table in ("instances", "history", "inbox", "activities"):
                    db.execute(f"DELETE FROM {table} WHERE iid = ?", (iid,))
            for iid in tx.history_clear:
                db.execute("DELETE FROM history WHERE iid = ?", (iid,))
            if tx.history_append:
                db.executemany("INSERT OR REPLACE INTO history (iid, idx, ev) VALUES (?, ?, ?)",
                               tx.history_append)
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
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def load(self) -> tuple[list[LoadedInstance], dict[str, int]]:
        db = self._db
        history: dict[str, list[bytes]] = {}
        for iid, ev in db.execute("SELECT iid, ev FROM history ORDER BY iid, idx"):
            history.setdefault(iid, []).append(ev)
        inbox: dict[str, list[tuple[int, int, int, bytes]]] = {}
        for iid, seq, vis, gen, ev in db.execute(
                "SELECT iid, seq, visible_at, gen, ev FROM inbox ORDER BY iid, seq"):
            inbox.setdefault(iid, []).append((seq, vis, gen, ev))
        acts: dict[str, list[tuple[int, int, bytes]]] = {}
        for iid, task_id, gen, req in db.execute(
                "SELECT iid, task_id, gen, req FROM activities ORDER BY iid, task_id"):
            acts.setdefault(iid, []).append((task_id, gen, req))
        loaded = [
            LoadedInstance(iid=iid, meta=json.loads(meta), history=history.get(iid, []),
                           inbox=inbox.get(iid, []), activities=acts.get(iid, []))
            for iid, meta in db.execute("SELECT iid, meta FROM instances")
        ]
        counters = dict(db.execute("SELECT name, value FROM counters"))
        return loaded, counters

    def close(self) -> None:
        self._db.close()


class StoreError(Exception):
    """The database could not be opened or read."""


def open_store(db: str) -> MemoryStore | SqliteStore:
    """`:memory:` keeps nothing; anything else is a SQLite file path."""
    if db == ":memory:":
        return MemoryStore()
    path = Path(db)
    if path.parent and not path.parent.exists():
        raise StoreError(f"the directory of --db {db} does not exist; create it or pass another path")
    return SqliteStore(path)
