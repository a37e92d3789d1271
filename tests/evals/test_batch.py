"""Batch runs end to end on CPU: built-in policies, resume after SIGKILL, a local Ray executor."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

KB_ROOT = Path(__file__).parents[1] / "fixtures" / "kernelbench"
SMALL = "19,21,23,47,54"  # elementwise x2, softmax, a reduction, and a conv (implicit GEMM)


def kiln(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", *args], capture_output=True, text=True, **kw)


def rows(db: Path, table: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT * FROM {table}").fetchall()
    finally:
        con.close()


def _rows_if_ready(db: Path) -> list[tuple]:
    """The samples so far; none while the store's schema is still being created."""
    try:
        return rows(db, "samples")
    except sqlite3.OperationalError:
        return []


@pytest.mark.slow
def test_oneshot_builtin_batch_and_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = kiln("eval", "kernelbench", "--root", str(KB_ROOT), "--level", "1", "--problems", SMALL,
                "--mode", "oneshot", "--llm", "builtin", "--device", "cpu", "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_problems"] == 5
    assert metrics["fast_p"]["eager"]["1.0"] is None  # no GPU: not measured, not zero
    statuses = {json.loads(r[2])["problem"]: json.loads(r[2])["status"] for r in rows(out / "results.sqlite", "samples")}
    assert statuses["level1/54_conv_standard_2D"] == "ok"  # the built-in conv family (issue 23)
    assert statuses["level1/19_ReLU"] == "ok"
    assert metrics["correct_rate"] == pytest.approx(sum(s == "ok" for s in statuses.values()) / 5)
    rep = kiln("report", str(out), timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert (out / "report" / "index.html").exists()


@pytest.mark.slow
def test_sigkill_mid_batch_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", "kernelbench", "--root", str(KB_ROOT), "--level", "1", "--problems", "19,21,23,24,26",
            "--mode", "oneshot", "--llm", "builtin", "--device", "cpu", "--out", str(out), "--concurrency", "1",
            "--cpu-slots", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "kiln.evals.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    db = out / "results.sqlite"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if db.exists() and len(_rows_if_ready(db)) >= 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {(r[0], r[1]): r[4] for r in rows(db, "samples")}
    assert 2 <= len(before) < 5, "the kill must land mid-batch"
    resumed = kiln(*args, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = rows(db, "samples")
    assert len(after) == 5 and len({(r[0], r[1]) for r in after}) == 5  # all done, no duplicates
    assert all({(r[0], r[1]): r[4] for r in after}[k] == t for k, t in before.items())  # finished work kept as is
    cands = rows(db, "candidates")
    assert len({(r[0], r[1], r[2]) for r in cands}) == len(cands)


@pytest.mark.slow
def test_local_ray_executor(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="install the ray extra: pip install 'kernelkiln[ray]'")
    out = tmp_path / "run"
    proc = kiln("eval", "kernelbench", "--root", str(KB_ROOT), "--level", "1", "--problems", "19,23,54",
                "--mode", "oneshot", "--llm", "builtin", "--device", "cpu", "--executor", "ray", "--out", str(out),
                timeout=900, env={**os.environ, "RAY_DISABLE_USAGE_STATS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    samples = [json.loads(r[2]) for r in rows(out / "results.sqlite", "samples")]
    assert {s["problem"]: s["status"] for s in samples}["level1/19_ReLU"] == "ok"
    assert len(samples) == 3


def test_bad_inputs_give_one_line_errors(tmp_path: Path) -> None:
    proc = kiln("eval", "kernelbench", "--root", str(tmp_path), "--llm", "builtin")
    assert proc.returncode == 2 and "not a KernelBench checkout" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = kiln("eval", "kernelbench", "--root", str(KB_ROOT), "--level", "4", "--llm", "builtin")
    assert proc.returncode == 2 and "level 4" in proc.stderr
    proc = kiln("eval", "kernelbench", "--root", str(KB_ROOT), "--problems", "3-x", "--llm", "builtin")
    assert proc.returncode == 2 and "bad --problems" in proc.stderr
