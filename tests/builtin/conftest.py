"""Helpers for the built-in policies' tests: generate candidates, run them in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder

HERE = Path(__file__).parent
REPO = HERE.parent.parent
EXAMPLES = REPO / "examples"
PROBLEMS = HERE / "problems"


def generate(problem: Path, out_dir: Path, mode: str = "generate") -> Path:
    reply = BuiltinCoder().write(CoderTask(mode=mode, problem_name=problem.stem, problem_src=problem.read_text()))
    assert reply.ok, f"{problem.name}: {reply.error}"
    assert reply.source is not None
    out = out_dir / f"cand_{problem.stem}.py"
    out.write_text(reply.source)
    return out


def selfcheck(pairs: list[tuple[Path, Path]], timeout_s: float = 900) -> list[dict]:
    """Run kiln.agents.builtin.selfcheck on (problem, candidate) pairs under the Triton interpreter."""
    argv = [str(p) for pair in pairs for p in pair]
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "kiln.agents.builtin.selfcheck", *argv], env=env,
                          capture_output=True, text=True, timeout=timeout_s)  # fmt: skip
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(pairs), proc.stderr[-2000:]
    return results


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


@pytest.fixture
def gen():
    """generate(problem, out_dir) -> candidate path (the built-in Coder's first candidate)."""
    return generate


@pytest.fixture
def run_selfcheck():
    """selfcheck(pairs) -> one result dict per (problem, candidate), run under the interpreter."""
    return selfcheck
