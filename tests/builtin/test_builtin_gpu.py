"""On a GPU: every example's and coverage problem's first candidate (H200 configuration) matches
eager, at the default and the large benchmark sizes (real Triton compile, split reductions too). Run on the device machine: python -m pytest -m gpu tests/builtin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin import BuiltinCoder

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
@pytest.mark.parametrize("folder", ["examples", "examples/large", "tests/builtin/problems"])
def test_first_candidates_match_eager_on_the_gpu(folder: str, tmp_path: Path) -> None:
    argv = []
    for p in sorted((ROOT / folder).glob("*.py")):
        task = CoderTask(mode="generate", problem_name=p.stem, problem_src=p.read_text(), gpu=GpuFacts(device="cuda"))
        reply = BuiltinCoder().write(task)
        assert reply.ok and reply.source, reply.error
        (tmp_path / p.name).write_text(reply.source)
        argv += [str(p), str(tmp_path / p.name)]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "kiln.agents.builtin.selfcheck", *argv], env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.count('"ok": true') == len(argv) // 2
