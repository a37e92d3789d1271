"""One timing at a time per GPU (kiln.tools.timing.exclusive): two checks timing at once on one GPU
read each other's kernels as their own, so a check's timing stage holds the GPU's lock, across
threads and processes, and records how long it waited; a lock it never got is said in its reasons."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kiln.tools.check import caches, check
from kiln.tools.records import CheckOptions
from kiln.tools.timing.exclusive import gpu_timing_lock

DATA = Path(__file__).parent / "data"
TIMED = CheckOptions(device="cpu", trials=1, timeout_s=120, timing_timeout_s=4.0, time_on_cpu=True,
                     baselines=["eager"])
HOLD = """
import sys, time
from pathlib import Path
from kiln.tools.timing.exclusive import gpu_timing_lock
with gpu_timing_lock(Path(sys.argv[1]), int(sys.argv[2]), 5.0) as waited:
    print("held", waited, flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _hold(folder: Path, gpu: int, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(gpu), str(seconds)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("held")
    return proc


def test_two_threads_time_one_after_the_other(tmp_path: Path) -> None:
    spans: list[tuple[float, float, float | None]] = []

    def one() -> None:
        with gpu_timing_lock(tmp_path, 0, 10.0) as waited:
            t0 = time.monotonic()
            time.sleep(0.3)
            spans.append((t0, time.monotonic(), waited))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans.sort()
    assert all(w is not None for _, _, w in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # never two at once
    assert max(w for _, _, w in spans) >= 0.55  # the last one waited for the two before it


def test_another_gpu_is_not_held_and_a_dead_holder_lets_go(tmp_path: Path) -> None:
    proc = _hold(tmp_path, 0, 60)
    try:
        with gpu_timing_lock(tmp_path, 1, 0.2) as waited:
            assert waited is not None and waited < 0.2  # GPU 1's lock is its own
        with gpu_timing_lock(tmp_path, 0, 0.3) as waited:
            assert waited is None  # GPU 0 held the whole wait
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        with gpu_timing_lock(tmp_path, 0, 2.0) as waited:
            assert waited is not None  # the kernel dropped the dead holder's lock
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_check_records_its_wait_and_says_when_it_timed_without_the_lock(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    rec = check(DATA / "add_problem.py", DATA / "add_triton.py", TIMED)
    assert rec.status == "ok" and rec.timing and rec.timing.measured, rec.reasons
    assert 0 <= rec.stages_s["timing_wait"] < 1.0
    assert not any("timing lock" in r for r in rec.reasons)
    parts = {k: v for k, v in rec.stages_s.items() if k.startswith("timing.")}  # where the stage's time went
    assert {"timing.setup", "timing.candidate_laps", "timing.close_candidate", "timing.baselines",
            "timing.peaks"} <= set(parts)
    assert sum(parts.values()) <= rec.stages_s["timing"] + 0.01 and parts["timing.candidate_laps"] > 0
    locked = rec.stages_s["timing_locked"]  # laps and the baselines' laps held the lock; the set-up did not
    assert parts["timing.candidate_laps"] + parts["timing.baselines"] <= locked <= rec.stages_s["timing"]
    monkeypatch.setattr(caches, "gpu_identity", lambda index: "cpu (test)")  # baselines cached, as on a GPU
    check(DATA / "add_problem.py", DATA / "add_triton.py", TIMED)  # measures eager and caches it
    again = check(DATA / "add_problem.py", DATA / "add_triton.py", TIMED)  # eager from the cache
    assert again.status == "ok", again.reasons
    parts = {k: v for k, v in again.stages_s.items() if k.startswith("timing.")}
    assert again.evidence.baselines_cached == ["eager"]
    if not again.integrity.timing.base_steps_now:  # nothing else to time: the lock covers the laps alone,
        assert "timing.baselines" not in parts and "timing.close_candidate" in parts  # the worker closes after it
        assert again.stages_s["timing_locked"] <= parts["timing.env"] + parts["timing.candidate_laps"] + 0.01
    else:  # the cached steps would have charged the candidate (noise on a busy host): timed again, locked
        assert parts["timing.baselines"] <= again.stages_s["timing_locked"]
    proc = _hold(caches.root() / "locks", -1, 120)  # the CPU protocol's lock, held by another process
    try:
        rec = check(DATA / "add_problem.py", DATA / "add_triton.py", TIMED.model_copy(update={"timing_timeout_s": 1.0}))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert rec.timing and rec.timing.measured and "timing_wait" not in rec.stages_s, rec.reasons
    assert any("without the GPU's timing lock" in r for r in rec.reasons), rec.reasons

