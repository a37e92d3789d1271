"""Fixtures of the profiler tests: rebuild reports from the H200 recordings in tests/fixtures/ncu."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kiln.tools.profile.api import build_report
from kiln.tools.profile.records import Peaks, ProfileReport

FIX = Path(__file__).parent.parent / "fixtures" / "ncu"
WORK = Path(__file__).parent / "workloads"
CASES = {  # workload -> (candidate, dtype, Triton kernel whose cubin was recorded)
    "softmax": ("softmax_triton.py", "fp32", "softmax_kernel"),
    "matmul": ("matmul_triton.py", "bf16", "matmul_kernel"),
    "scale_cuda": ("scale_cuda.py", "fp32", None),
}


def peaks() -> Peaks:
    return Peaks.model_validate_json((FIX / "h200_peaks.json").read_text())


def replay(workload: str, rung: str, tmp: Path) -> ProfileReport:
    """What `profile_candidate` would have built from the files it collected on the H200."""
    cand, dtype, cubin = CASES[workload]
    tag = "ncu" if rung == "ncu" else "torch"
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIX / f"h200_{workload}_{tag}_target.json", tmp / "target.json")
    if cubin:
        shutil.copy(FIX / f"h200_triton36_{cubin}.cubin", tmp / f"{cubin}.cubin")
    files = {"target": str(tmp / "target.json")}
    if rung == "ncu":
        files |= {p: str(FIX / f"h200_{workload}_full_{p}.csv") for p in ("raw", "details", "source")}
    else:
        files["trace"] = str(FIX / f"h200_{workload}_torch_trace.json")
    return build_report(rung, files, candidate=WORK / cand, peaks_=peaks(), dtype=dtype, level="full")


@pytest.fixture
def replayed(tmp_path: Path) -> Callable[[str, str], ProfileReport]:
    return lambda workload, rung: replay(workload, rung, tmp_path / f"{workload}-{rung}")
