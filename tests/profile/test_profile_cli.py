"""`kiln profile` as a user runs it (real subprocesses), the ncu command line, and rung detection here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.tools.profile import detect_rung, metrics, ncu
from kiln.tools.profile.records import ProfileReport

FIX = Path(__file__).parent.parent / "fixtures" / "ncu"
WORK = Path(__file__).parent / "workloads"


def kiln(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", "profile", *args], capture_output=True, text=True,
                          timeout=240, cwd=cwd, check=False)


def test_import_raw_csv_prints_digest_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = kiln("--import", str(FIX / "h200_softmax_full_raw.csv"), "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("# profile (ncu): h200_softmax_full_raw.csv on NVIDIA H200")
    report = ProfileReport.model_validate_json(out.read_text())
    data = json.loads(out.read_text())
    assert data["source"] == "ncu" and data["kernels"][0]["bound"] == "memory"
    assert {"roofline_pct", "findings", "duration_us", "memory_sol_pct", "dram_gbps"} <= set(data["kernels"][0])
    assert report.kernels[0].name == "softmax_kernel"


def test_import_matmul_details_csv_classifies_compute(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    res = kiln("--import", str(FIX / "h200_matmul_full_details.csv"), "--dtype", "bf16", "--json", str(out))
    assert res.returncode == 0, res.stderr
    k = ProfileReport.model_validate_json(out.read_text()).kernels[0]
    # ncu's FP32 counts miss MMA work, so an imported GEMM is judged by speed of light: tensor pipe 73% busy
    assert (k.bound, k.limiting_unit) == ("compute", "tensor") and k.wgmma


def test_import_ncu_rep(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    res = kiln("--import", str(FIX / "h200_scale_cuda_full.ncu-rep"))
    assert res.returncode == 0, res.stderr
    assert "scale_kernel" in res.stdout and "memory-bound" in res.stdout


def test_static_rung_on_a_cpu_machine(tmp_path: Path) -> None:
    if not (metrics and __import__("shutil").which("nvcc")):
        pytest.skip("needs nvcc")
    out = tmp_path / "s.json"
    res = kiln(str(WORK / "scale_problem.py"), str(WORK / "scale_cuda.py"), "--device", "cpu", "--json", str(out))
    assert res.returncode == 0, res.stderr
    report = ProfileReport.model_validate_json(out.read_text())
    assert report.source == "static" and report.kernels[0].name == "scale_kernel"
    assert report.kernels[0].registers_per_thread and report.kernels[0].sass is not None


def test_static_rung_builds_triton_offline(tmp_path: Path) -> None:
    """No GPU: the Triton matmul's launch is recorded under the interpreter and built for sm_90; its SASS
    matches what Triton 3.6 built on the H200 (tests/fixtures/ncu/h200_triton36_matmul_kernel.cubin)."""
    pytest.importorskip("triton")
    out = tmp_path / "t.json"
    res = kiln(str(WORK / "matmul_problem.py"), str(WORK / "matmul_triton.py"), "--device", "cpu", "--dtype", "bf16",
               "--json", str(out))
    assert res.returncode == 0, res.stderr
    (k,) = ProfileReport.model_validate_json(out.read_text()).kernels
    assert k.name == "matmul_kernel" and k.source == "static" and k.duration_us is None
    assert (k.num_warps, k.num_stages, k.shared_mem_bytes, k.spill_bytes) == (8, 3, 98304, 0)
    assert k.sass is not None and k.sass.tensor_core == "wgmma" and k.sass.global_load_widths_bits["128"] == 24
    assert 100 <= (k.registers_per_thread or 0) <= 128  # 110 on the H200
    assert "not run (compile-only)" in res.stdout and "compile-only: profile on a GPU" in res.stdout


@pytest.mark.parametrize(("args", "message"), [
    ((), "give PROBLEM and CANDIDATE, or --import REPORT"),
    (("--import", "/nonexistent.ncu-rep"), "report not found"),
    (("a.py", "b.py", "--level", "deep"), "--level must be quick or full"),
    (("missing_problem.py", "x.py", "--rung", "ncu"), "problem file not found"),
])
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    res = kiln(*args)
    assert res.returncode == 2
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_ncu_flags() -> None:
    mset = metrics.unchecked_metrics()
    args = ncu.profile_args(["python", "t.py"], report=Path("r.ncu-rep"), metrics=mset, level="quick")
    joined = " ".join(args)
    assert "--nvtx --nvtx-include kiln_candidate/" in joined
    assert "--target-processes all" in joined and "--clock-control none" in joined and "--replay-mode kernel" in joined
    assert "--section SourceCounters" not in joined and "--section SpeedOfLight" in joined
    assert args[-2:] == ["python", "t.py"]
    full = " ".join(ncu.profile_args(["p"], report=Path("r"), metrics=mset, level="full"))
    assert "--section SourceCounters" in full and "--section MemoryWorkloadAnalysis" in full
    assert "gpu__time_duration.sum" in full and "sm__maximum_warps_per_active_cycle_pct" not in full


def test_refusals_and_rejected_metrics_are_recognised() -> None:
    text = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    assert "ERR_NVGPUCTRPERM" in (ncu.refusal_reason(text) or "")
    assert "gVisor" in (ncu.refusal_reason("==ERROR== Failed to initialize the profiler: LibraryNotLoaded") or "")
    assert ncu.refusal_reason("==PROF== Disconnected") is None
    mset = metrics.unchecked_metrics()
    bad = ncu.rejected_metrics("==ERROR== Failed to find metric sm__pipe_tensor_op_gmma_cycles_active", mset)
    assert bad == ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"]


def test_detect_rung_without_a_gpu(tmp_path: Path) -> None:
    info = detect_rung(tmp_path)
    if info.gpu_name:
        pytest.skip("this machine has a GPU")
    assert info.rung in {"static", "none"} and "no CUDA GPU" in info.reason
    assert info.counters is None


def test_the_profiled_program_runs_at_the_callers_isolation(tmp_path: Path) -> None:
    # Strict with no usable bubblewrap refuses in one line before the candidate runs, from the CLI and
    # from the run's profiler (which gets the run's --isolation and --bwrap, like its checks).
    missing = str(tmp_path / "no-bwrap-here")
    res = kiln(str(WORK / "softmax_problem.py"), str(WORK / "softmax_triton.py"), "--device", "cpu",
               "--isolation", "strict", "--bwrap", missing)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "--isolation strict" in res.stderr.strip().splitlines()[-1]
    bad = kiln(str(WORK / "softmax_problem.py"), str(WORK / "softmax_triton.py"), "--isolation", "loose")
    assert bad.returncode != 0 and "--isolation must be strict or best-effort" in bad.stderr

    from kiln.graphs.profile import make_profiler

    profile, why_not = make_profiler("cuda", "strict", missing)
    assert profile is not None and why_not is None
    digest, skipped = profile(WORK / "softmax_problem.py", WORK / "softmax_triton.py")
    assert digest is None and skipped is not None and "--isolation strict" in skipped
