"""On the H200 (`pytest -m gpu tests/profile`): the ncu rung and the forced fallback rung classify a
Triton softmax, a plain CUDA kernel and a Triton matmul the same way, each profile within 30 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.tools.profile import detect_rung, profile_candidate, render_digest

pytestmark = pytest.mark.gpu
W = Path(__file__).parent / "workloads"
CASES = [("softmax_problem.py", "softmax_triton.py", "fp32", "memory"),
         ("scale_problem.py", "scale_cuda.py", "fp32", "memory"),
         ("matmul_problem.py", "matmul_triton.py", "bf16", "compute")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kiln-profile-cache")


def test_rung_is_ncu_on_the_gpu_machine(cache: Path) -> None:
    info = detect_rung(cache)
    assert info.rung == "ncu", info.reason
    assert info.counters is True and info.gpu_name


@pytest.mark.parametrize(("problem", "candidate", "dtype", "bound"), CASES, ids=["softmax", "cuda", "matmul"])
def test_both_rungs_agree(cache: Path, problem: str, candidate: str, dtype: str, bound: str) -> None:
    reports = {}
    for rung in ("ncu", "torch_profiler"):
        report = profile_candidate(W / problem, W / candidate, force_rung=rung, dtype=dtype, cache_dir=cache)
        assert report.source == rung, report.source_detail
        assert report.wall_s is not None and report.wall_s <= 30.0, f"{rung} took {report.wall_s} s"
        print(f"--- {rung} ({report.wall_s:.1f} s)\n{render_digest(report)}")
        reports[rung] = report
    main = {rung: r.kernels[0] for rung, r in reports.items()}
    assert main["ncu"].name == main["torch_profiler"].name
    assert main["ncu"].bound == main["torch_profiler"].bound == bound
    assert main["ncu"].limiting_unit in ({"dram", "l2", "l1"} if bound == "memory" else {"tensor"})
    if candidate == "matmul_triton.py":
        assert main["ncu"].wgmma and main["torch_profiler"].wgmma
