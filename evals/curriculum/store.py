"""The curriculum store: SQLite in WAL mode. Every module (accepted or refused, with the reason),
every checked sample and every finished round is committed on its own, so `kill -9` loses at most
what was in flight and rerunning the same command continues where it stopped."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kiln.agents.curriculum.base import ApiSet
from kiln.agents.curriculum.validate import ModuleVerdict
from kiln.evals.curriculum.frontier import Snapshot
from kiln.evals.curriculum.rewards import SampleReward
from kiln.tools.records import CheckRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS modules (
    id TEXT PRIMARY KEY, round INTEGER NOT NULL, attempt INTEGER NOT NULL, row TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS samples (
    module TEXT NOT NULL, sample INTEGER NOT NULL, row TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (module, sample)
);
CREATE TABLE IF NOT EXISTS rounds (round INTEGER PRIMARY KEY, snapshot TEXT NOT NULL, done INTEGER NOT NULL,
                                   started_at REAL NOT NULL, finished_at REAL);
"""


class ModuleRow(BaseModel):
    """One generated module and its verdict."""

    model_config = ConfigDict(extra="forbid")

    id: str
    round: int
    attempt: int
    api_set: ApiSet
    author: str = "template"
    source: str | None = None
    stress_sources: dict[str, str] = Field(default_factory=dict, description="valid stress variants by name")
    accepted: bool = False
    reason: str | None = None
    verdict: ModuleVerdict | None = None
    writer_prompt: str | None = Field(None, description="what an LLM problem writer was asked (for its training)")
    gen_s: float = Field(0.0, description="writing + validation wall time")


class SampleRow(BaseModel):
    """One Coder sample for a module and its check."""

    model_config = ConfigDict(extra="forbid")

    module: str
    sample: int
    candidate: str = Field(description="the completion's code (or its raw text when it held none)")
    coder_error: str | None = None
    record: CheckRecord
    reward: SampleReward | None = None
    check_s: float = 0.0


class CurriculumStore:
    """Thread-safe: one connection guarded by a lock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def set_meta(self, key: str, value: Any) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default

    def add_module(self, row: ModuleRow) -> None:
        self._write("INSERT OR REPLACE INTO modules VALUES (?, ?, ?, ?, ?)",
                    (row.id, row.round, row.attempt, row.model_dump_json(), time.time()))

    def modules(self, round_: int | None = None) -> list[ModuleRow]:
        sql = "SELECT row FROM modules" + (" WHERE round = ?" if round_ is not None else "") + " ORDER BY round, attempt"
        return [ModuleRow.model_validate_json(r[0]) for r in self._read(sql, () if round_ is None else (round_,))]

    def module_times(self) -> list[float]:
        return [r[0] for r in self._read("SELECT created_at FROM modules ORDER BY created_at")]

    def add_sample(self, row: SampleRow) -> None:
        self._write("INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?)",
                    (row.module, row.sample, row.model_dump_json(), time.time()))

    def samples(self, module: str | None = None) -> list[SampleRow]:
        sql = "SELECT row FROM samples" + (" WHERE module = ?" if module else "") + " ORDER BY module, sample"
        return [SampleRow.model_validate_json(r[0]) for r in self._read(sql, (module,) if module else ())]

    def start_round(self, snap: Snapshot) -> None:
        self._write("INSERT OR IGNORE INTO rounds VALUES (?, ?, 0, ?, NULL)",
                    (snap.round, snap.model_dump_json(), time.time()))

    def finish_round(self, round_: int) -> None:
        self._write("UPDATE rounds SET done = 1, finished_at = ? WHERE round = ?", (time.time(), round_))

    def snapshot(self, round_: int) -> tuple[Snapshot, bool] | None:
        rows = self._read("SELECT snapshot, done FROM rounds WHERE round = ?", (round_,))
        return (Snapshot.model_validate_json(rows[0][0]), bool(rows[0][1])) if rows else None

    def snapshots(self) -> list[Snapshot]:
        return [Snapshot.model_validate_json(r[0]) for r in self._read("SELECT snapshot FROM rounds ORDER BY round")]

    def round_times(self) -> dict[int, tuple[float, float | None]]:
        return {r[0]: (r[1], r[2]) for r in self._read("SELECT round, started_at, finished_at FROM rounds")}

    def _write(self, sql: str, args: tuple) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()
