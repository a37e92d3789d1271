"""The curriculum store refuses a damaged file in one line, as the batch store does (one SQLite base,
`kiln.tools.sqlite_store`; issue 27)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.evals.curriculum.store import CurriculumStore
from kiln.tools.errors import KilnInputError


def test_a_truncated_curriculum_store_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "curriculum.sqlite"
    store = CurriculumStore(db)
    for i in range(400):
        store.set_meta(f"key{i}", "x" * 200)
    store.close()
    data = db.read_bytes()
    assert len(data) > 8192
    db.write_bytes(data[: len(data) // 2])
    with pytest.raises(KilnInputError, match="is damaged .*start the curriculum again"):
        CurriculumStore(db)
    db.unlink()
    again = CurriculumStore(db)  # a fresh one starts normally and keeps what it is given
    again.set_meta("config", {"rounds": 2})
    assert again.get_meta("config") == {"rounds": 2} and again.get_meta("missing", 7) == 7
    again.close()
