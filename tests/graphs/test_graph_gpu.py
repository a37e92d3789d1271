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


@pytest.mark.gpu
def test_transcript_kernels_at_kernelbench_sizes_reach_the_judge_with_ncu_numbers(tmp_path):
    """The real model's four kernels at KernelBench's real sizes: correct, timed against eager and
    torch.compile, profiled by Nsight Compute, and the Judge's prompt carries the digest with its
    roofline numbers. Needs KILN_KERNELBENCH_ROOT (a KernelBench checkout)."""
    root = os.environ.get("KILN_KERNELBENCH_ROOT")
    if not root:
        pytest.skip("set KILN_KERNELBENCH_ROOT to a KernelBench checkout")
    bench = Path(__file__).parents[2] / "bench" / "transcripts_gpu.py"
    done = subprocess.run([sys.executable, str(bench), "--root", root, "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=3000, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "transcripts_gpu.json").read_text())
    print(json.dumps(rows, indent=1))
    assert len(rows) == 4
    for row in rows:
        assert row["correct"], row
        assert row["speedup_vs_eager"] is not None and row["speedup_vs_compile"] is not None, row
        assert row["judge_calls"] == 1 and row["digest_in_judge_prompt"], row
        assert row["digest_from_ncu"] and row["digest_has_roofline"], row["digest_head"]
