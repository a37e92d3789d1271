"""The base of kiln's SQLite stores (the batch results, the curriculum): WAL mode, full sync, one
connection guarded by a lock, every write its own transaction, so `kill -9` loses at most what was
in flight. A damaged file, or an emptied one beside the work it recorded, is refused in one line
(`KilnInputError`) rather than silently started over. Each product keeps its own tables."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from kiln.tools.errors import KilnInputError

META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
"""Every store's table of settings (JSON values by key)."""


def refuse_emptied(path: Path, work: Path | None, what: str) -> None:
    """An empty store next to finished work (`work`, a folder with entries) was truncated, not new:
    starting over would silently pay for all that work again."""
    if work is not None and path.exists() and path.stat().st_size == 0 and work.is_dir() and any(work.iterdir()):
        raise KilnInputError(f"{path} is empty, but {path.parent} holds a {what}'s work ({work}): the store was "
                             "truncated; restore it, or move the folder aside to start again")


class SqliteStore:
    """Thread-safe: one connection guarded by a lock (writes are small and rare).

    `schema`: the product's tables (CREATE ... IF NOT EXISTS), besides `meta`; `what`: the product, for messages;
    `work`: the folder of finished work an emptied store would orphan (None: no such check)."""

    def __init__(self, path: Path, schema: str, *, what: str, work: Path | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        refuse_emptied(path, work, what)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            ok = self._db.execute("PRAGMA quick_check").fetchone()
            if ok is None or ok[0] != "ok":
                raise sqlite3.DatabaseError(str(ok[0] if ok else "no answer"))
            self._db.executescript(META + schema)
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise KilnInputError(f"{path} is damaged ({err}): restore it, or move it aside to start the {what} "
                                 "again") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def set_meta(self, key: str, value: Any) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._read_one("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(row[0]) if row else default

    def _write(self, sql: str, args: tuple) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _read_one(self, sql: str, args: tuple = ()) -> tuple | None:
        with self._lock:
            return self._db.execute(sql, args).fetchone()

    def _read_all(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()
