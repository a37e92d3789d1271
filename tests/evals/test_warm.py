"""A batch starts the fork servers its checks will use before the first check needs them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kiln.evals.executors import SlottedEvaluator
from kiln.tools.check import LocalEvaluator, caches
from kiln.tools.records import CheckOptions
from kiln.tools.sandbox import zygote


def test_warm_starts_the_fork_server_the_checks_then_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    zygote.shutdown()
    evaluator = SlottedEvaluator(LocalEvaluator(), gpus=[], cpu_slots=2)
    threads = evaluator.warm(CheckOptions(device="cpu"))
    assert threads
    for t in threads:
        t.join(120)
    from kiln.tools.sandbox.box import sandbox_for

    # one server per sandbox configuration and cache root (the root's dirs are what it mounts)
    key = ("cpu", 0, sys.executable, sandbox_for().key, str(caches.root()))
    server = zygote._POOL.get(key)
    assert server is not None and server.alive()
    data = Path(__file__).parents[1] / "core" / "data"
    rec = evaluator.check(data / "add_problem.py", data / "add_triton.py", CheckOptions(device="cpu", trials=1))
    assert rec.status == "ok", rec.reasons
    assert zygote._POOL.get(key) is server  # the check forked from the warmed server, not a new one


def test_no_fork_server_no_warm() -> None:
    evaluator = SlottedEvaluator(LocalEvaluator(), gpus=[], cpu_slots=1)
    assert evaluator.warm(CheckOptions(device="cpu", fork_server=False)) == []
