"""examples/rl/trl_grpo.py: TRL's GRPO trainer calls kiln's reward and steps (tiny random model, CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_trl_grpo_runs_two_steps_with_kiln_as_its_reward(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "rl" / "trl_grpo.py"), "--tiny", "--steps", "2",
                           "--problems", str(ROOT / "tests/fixtures/problems/relu.py"),
                           str(ROOT / "tests/fixtures/problems/row_softmax.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 2
    assert summary["completions_checked"] == 4  # 2 steps x 1 prompt x 2 generations
    assert set(summary["statuses"]) <= {"compile_error", "incorrect", "rejected", "crashed", "ok"}
    assert (tmp_path / "checks.sqlite").exists()  # the reward's verdict cache
