"""On the H200 (`pytest -m gpu tests/graphs`): the built-in loop times, profiles and stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.gpu
def test_builtin_run_on_gpu_is_timed_profiled_and_honest(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "run", str(EXAMPLES / "softmax.py"), "--device",
                           "cuda", "--out", str(run_dir), "--max-iters", "2", "--quiet"],
                          capture_output=True, text=True, timeout=1800, env=os.environ.copy())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] in ("solved", "budget", "no_progress", "stopped"), done.stderr[-2000:]
    assert summary["speed_measured"] and summary["best"]["speedup_vs_eager"] is not None
    assert summary["best"]["speedup_vs_compile"] is not None
    if summary["status"] == "solved":
        assert summary["best"]["correct"] and summary["stress_rounds"] >= 1
    assert any(row["time_s"] > 0 for row in summary["per_iteration"])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    profiles = [e for e in events if e["kind"] == "profile"]
    assert profiles, "the profile node never ran on a correct kernel"
    for e in profiles:  # a digest for the Judge, or a reason in plain words
        assert (run_dir / "candidates" / e["id"] / "profile.txt").exists() if e["skipped"] is None else e["skipped"]
    print(json.dumps({k: summary[k] for k in ("status", "stop_reason", "best", "iterations", "per_iteration")},
                     indent=1))
