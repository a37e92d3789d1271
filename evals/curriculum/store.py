"""The curriculum store: SQLite in WAL mode. Every module (accepted or refused, with the reason),
every checked sample and every finished round is committed on its own, so `kill -9` loses at most
what was in flight and rerunning the same command continues where it stopped."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kiln.agents.curriculum.base import ApiSet
from kiln.agents.curriculum.validate import ModuleVerdict
from kiln.evals.curriculum.frontier import Snapshot
from kiln.evals.curriculum.rewards import SampleReward
from kiln.tools.records import CheckRecord
from kiln.tools.sqlite_store import SqliteStore

SCHEMA = """
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


class CurriculumStore(SqliteStore):
    """Thread-safe (`SqliteStore`); a damaged store is refused in one line."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA, what="curriculum")

    def add_module(self, row: ModuleRow) -> None:
        self._write("INSERT OR REPLACE INTO modules VALUES (?, ?, ?, ?, ?)",
                    (row.id, row.round, row.attempt, row.model_dump_json(), time.time()))

    def modules(self, round_: int | None = None) -> list[ModuleRow]:
        sql = "SELECT row FROM modules" + (" WHERE round = ?" if round_ is not None else "") + " ORDER BY round, attempt"
        return [ModuleRow.model_validate_json(r[0]) for r in self._read_all(sql, () if round_ is None else (round_,))]

    def module_times(self) -> list[float]:
        return [r[0] for r in self._read_all("SELECT created_at FROM modules ORDER BY created_at")]

    def add_sample(self, row: SampleRow) -> None:
        self._write("INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?)",
                    (row.module, row.sample, row.model_dump_json(), time.time()))

    def samples(self, module: str | None = None) -> list[SampleRow]:
        sql = "SELECT row FROM samples" + (" WHERE module = ?" if module else "") + " ORDER BY module, sample"
        return [SampleRow.model_validate_json(r[0]) for r in self._read_all(sql, (module,) if module else ())]

    def start_round(self, snap: Snapshot) -> None:
        self._write("INSERT OR IGNORE INTO rounds VALUES (?, ?, 0, ?, NULL)",
                    (snap.round, snap.model_dump_json(), time.time()))

    def finish_round(self, round_: int) -> None:
        self._write("UPDATE rounds SET done = 1, finished_at = ? WHERE round = ?", (time.time(), round_))

    def snapshot(self, round_: int) -> tuple[Snapshot, bool] | None:
        rows = self._read_all("SELECT snapshot, done FROM rounds WHERE round = ?", (round_,))
        return (Snapshot.model_validate_json(rows[0][0]), bool(rows[0][1])) if rows else None

    def snapshots(self) -> list[Snapshot]:
        return [Snapshot.model_validate_json(r[0]) for r in self._read_all("SELECT snapshot FROM rounds ORDER BY round")]

    def round_times(self) -> dict[int, tuple[float, float | None]]:
        return {r[0]: (r[1], r[2]) for r in self._read_all("SELECT round, started_at, finished_at FROM rounds")}
