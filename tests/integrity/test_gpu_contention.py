"""On the GPU: a check says when other processes held the GPU while it timed (their kernels share the
GPU, so the times are off), and says nothing when none did. Runs alone (bench/device.sh gpu_tests
runs it before the xdist groups): `pytest -m gpu tests/integrity/test_gpu_contention.py`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kiln.tools.check import check
from kiln.tools.records import CheckOptions

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOG = "import sys, time, torch; x = torch.ones(1, device='cuda'); torch.cuda.synchronize(); print('up', flush=True); time.sleep(600)"


def _check():
    return check(FIXTURES / "problems" / "relu.py", FIXTURES / "kernels" / "correct" / "triton" / "relu.py",
                 CheckOptions(device="cuda", baselines=["eager"], trials=2))


def test_a_check_alone_on_the_gpu_reports_no_other_process() -> None:
    rec = _check()
    assert rec.status == "ok", rec.reasons
    assert rec.timing is not None and rec.timing.env is not None
    if rec.timing.env.other_gpu_processes is None:
        pytest.skip("NVML lists no processes on this machine")
    assert rec.timing.env.other_gpu_processes == 0
    assert not any("other process" in r for r in rec.reasons)


def test_a_process_holding_the_gpu_is_named_in_the_record() -> None:
    hog = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "up"
        time.sleep(0.5)
        rec = _check()
    finally:
        hog.kill()
        hog.wait()
    assert rec.status == "ok", rec.reasons
    assert rec.timing is not None and rec.timing.env is not None
    if rec.timing.env.other_gpu_processes is None:
        pytest.skip("NVML lists no processes on this machine")
    assert rec.timing.env.other_gpu_processes >= 1
    assert any("other process(es) held the GPU" in r for r in rec.reasons)
