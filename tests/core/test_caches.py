"""kiln's caches are read and written by kiln's own process only; a worker gets no path to them
except the candidate's own per-source compile cache. (Peaks: tests/integrity/test_physics.py.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kiln.tools.check import caches


@pytest.fixture
def session(tmp_path: Path, monkeypatch):  # noqa: ANN201 - a stand-in with the fields caches read
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(caches, "gpu_identity", lambda _i: "NVIDIA H200|GPU-test")
    problem = tmp_path / "problem.py"
    problem.write_text("# a problem\n")
    return SimpleNamespace(o=SimpleNamespace(dtype="fp32", gpu_index=0), rec=SimpleNamespace(device="cuda"),
                           cases=[SimpleNamespace(path=str(problem))])


def test_a_baseline_is_reused_until_the_problem_changes(session, tmp_path: Path) -> None:
    run = {"samples_us": [10.0, 11.0], "wall_s": 0.5, "n_calls": 2, "junk": "dropped"}
    caches.store_baseline(session, "eager", 4, run)
    hit = caches.baseline(session, "eager", 4)
    assert hit and hit["cached"] and hit["samples_us"] == [10.0, 11.0] and "junk" not in hit
    assert caches.baseline(session, "eager", 2) is None  # another input pool size
    Path(session.cases[0].path).write_text("# the problem changed\n")
    assert caches.baseline(session, "eager", 4) is None


def test_reference_facts_need_both_parts(session) -> None:
    caches.store_reference_facts(session, {"physics": {"bytes_moved": 8}})
    assert caches.reference_facts(session) is None
    caches.store_reference_facts(session, {"physics": {"bytes_moved": 8}, "degenerate": {"degenerate": False}})
    assert caches.reference_facts(session)["cached"]


def test_the_candidate_compile_cache_is_per_source(session) -> None:
    a, b = caches.candidate_cache("a" * 64), caches.candidate_cache("b" * 64)
    assert a != b and a.parent == b.parent == caches.root() / "cand"
