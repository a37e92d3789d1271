"""The batch results store: SQLite in WAL mode, one row per (problem, sample, candidate).

Every finished piece of work is committed on its own, so `kill -9` loses at most what was in
flight, and rerunning the same command skips what is already done. Baselines are cached per
(GPU, driver, torch, Triton, dtype, problem hash), measured in kiln's own harness.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

from kiln.evals.batch.metrics import SampleOutcome
from kiln.tools.records import CheckRecord
from kiln.tools.sqlite_store import SqliteStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS candidates (
    problem TEXT NOT NULL, sample INTEGER NOT NULL, candidate INTEGER NOT NULL,
    status TEXT NOT NULL, correct INTEGER NOT NULL, source_path TEXT, record TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (problem, sample, candidate)
);
CREATE TABLE IF NOT EXISTS samples (
    problem TEXT NOT NULL, sample INTEGER NOT NULL, outcome TEXT NOT NULL, best_path TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (problem, sample)
);
CREATE TABLE IF NOT EXISTS baselines (
    key TEXT PRIMARY KEY, problem TEXT NOT NULL, stats TEXT NOT NULL, created_at REAL NOT NULL
);
"""


class ResultStore(SqliteStore):
    """Thread-safe (`SqliteStore`); a damaged or emptied store is refused in one line."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA, what="batch", work=path.parent / "problems")

    # -- results
    def add_candidate(self, problem: str, sample: int, candidate: int, record: CheckRecord,
                      source_path: str | None = None) -> None:
        self._write(
            "INSERT OR REPLACE INTO candidates VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (problem, sample, candidate, record.status, int(record.correct), source_path,
             record.model_dump_json(), time.time()),
        )

    def finish_sample(self, outcome: SampleOutcome, best_path: str | None = None) -> None:
        self._write(
            "INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?)",
            (outcome.problem, outcome.sample, outcome.model_dump_json(), best_path, time.time()),
        )

    def is_done(self, problem: str, sample: int) -> bool:
        return self._read_one("SELECT 1 FROM samples WHERE problem = ? AND sample = ?", (problem, sample)) is not None

    def outcomes(self) -> list[SampleOutcome]:
        rows = self._read_all("SELECT outcome FROM samples ORDER BY problem, sample")
        return [SampleOutcome.model_validate_json(r[0]) for r in rows]

    def best_paths(self) -> dict[tuple[str, int], str | None]:
        rows = self._read_all("SELECT problem, sample, best_path FROM samples")
        return {(r[0], r[1]): r[2] for r in rows}

    def candidates(self, problem: str | None = None) -> Iterator[tuple[str, int, int, CheckRecord, str | None]]:
        sql = "SELECT problem, sample, candidate, record, source_path FROM candidates"
        rows = self._read_all(sql + " WHERE problem = ? ORDER BY sample, candidate", (problem,)) if problem \
            else self._read_all(sql + " ORDER BY problem, sample, candidate")
        for prob, sample, cand, rec, src in rows:
            yield prob, sample, cand, CheckRecord.model_validate_json(rec), src

    def count_candidates(self) -> int:
        row = self._read_one("SELECT COUNT(*) FROM candidates")
        return int(row[0]) if row else 0

    # -- baselines
    def put_baseline(self, key: str, problem: str, stats: dict) -> None:
        self._write("INSERT OR IGNORE INTO baselines VALUES (?, ?, ?, ?)",
                    (key, problem, json.dumps(stats), time.time()))

    def baselines(self) -> dict[str, dict]:
        return {r[0]: json.loads(r[1]) for r in self._read_all("SELECT problem, stats FROM baselines")}
