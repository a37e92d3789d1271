"""Fixtures of the red-team corpus: every check runs with HOME and kiln's cache in the test's own
folder, so what a hostile candidate writes there is the test's to inspect (and to throw away)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's world in tmp_path: `home/` (HOME), `project/` (the working directory kiln runs in, where
    the candidate file lives), `cache/` (KILN_CACHE_DIR). Workers inherit HOME and KILN_CACHE_DIR."""
    for d in ("home", "project", "cache"):
        (tmp_path / d).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path
