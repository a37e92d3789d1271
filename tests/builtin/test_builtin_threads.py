"""Batch runs call the built-in Coder from many threads: every call must still succeed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder

LEVEL1 = Path(__file__).parents[1] / "fixtures" / "kernelbench" / "KernelBench" / "level1"


def test_concurrent_generate_calls_all_succeed() -> None:
    files = [f for f in sorted(LEVEL1.glob("*.py")) if "conv" not in f.name] * 3

    def one(f: Path) -> tuple[bool, str]:
        reply = BuiltinCoder(device="cpu").write(CoderTask(mode="generate", problem_name=f.stem,
                                                          problem_src=f.read_text()))
        return reply.ok, reply.error or ""

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(one, files))
    assert [e for ok, e in results if not ok] == []
