"""Fixtures of the red-team corpus: every check runs with HOME in the test's own folder, so what a
hostile candidate writes there is the test's to inspect (and to throw away).

kiln's cache (KILN_CACHE_DIR) is one per session, outside the user's real one: a sandboxed fork
server is bound to the cache root it mounts, so a root per test would start a server per test
(about 2 s each, 50 tests). A test that inspects the cache itself asks for its own
(`@pytest.mark.private_cache`)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("redteam-cache")


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_cache: Path, request: pytest.FixtureRequest) -> Path:
    """A user's world in tmp_path: `home/` (HOME), `project/` (the working directory kiln runs in, where
    the candidate file lives), `cache/` (KILN_CACHE_DIR: the session's, or the test's own under
    `private_cache`). Workers inherit HOME and KILN_CACHE_DIR."""
    for d in ("home", "project"):
        (tmp_path / d).mkdir()
    cache = tmp_path / "cache"
    if request.node.get_closest_marker("private_cache"):
        cache.mkdir()
    else:
        cache.symlink_to(shared_cache, target_is_directory=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KILN_CACHE_DIR", str(cache.resolve()))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path
