"""Parsers on real Nsight Compute 2025.3 / torch-profiler output recorded on the H200 (tests/fixtures/ncu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.tools.errors import KilnInputError
from kiln.tools.profile import from_ncu, metrics, parse_ncu, parse_torch
from kiln.tools.profile.api import import_report

FIX = Path(__file__).parent.parent / "fixtures" / "ncu"


def _read(name: str) -> str:
    return (FIX / name).read_text()


def _merged(workload: str) -> from_ncu.KernelProfile:
    raw = parse_ncu.parse_raw_csv(_read(f"h200_{workload}_full_raw.csv"))
    details = parse_ncu.parse_details_csv(_read(f"h200_{workload}_full_details.csv"))
    (data,) = from_ncu.merge(raw, details)
    return from_ncu.kernel_profile(data)


def test_raw_page_softmax() -> None:
    (k,) = parse_ncu.parse_raw_csv(_read("h200_softmax_full_raw.csv"))
    assert k.name == "softmax_kernel" and k.block == [256, 1, 1] and k.grid == [8192, 1, 1]
    assert k.metrics["gpu__time_duration.sum"] == 64928.0  # "64,928" ns in the file
    assert k.metrics["dram__bytes_read.sum"] == 134_143_744
    assert k.text["device__attribute_display_name"] == "NVIDIA H200"
    assert len(k.metrics) > 800


def test_details_page_has_rules_and_both_name_kinds() -> None:
    (k,) = parse_ncu.parse_details_csv(_read("h200_softmax_full_details.csv"))
    rules = {r.name: r for r in k.rules}
    assert rules["UncoalescedGlobalAccess"].kind == "OPT"
    assert rules["UncoalescedGlobalAccess"].est_speedup_pct == pytest.approx(17.09, abs=0.5)
    assert "1828864 excessive sectors" in rules["UncoalescedGlobalAccess"].message
    assert k.metrics["lts__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(90.18)
    assert k.metrics["GPU Speed Of Light Throughput/Duration"] == 64928.0
    assert k.metrics["Occupancy/Theoretical Occupancy"] == 62.5


def test_softmax_kernel_profile() -> None:
    k = _merged("softmax")
    assert k.duration_us == pytest.approx(64.928)
    assert k.memory_sol_pct == pytest.approx(78.24) and k.compute_sol_pct == pytest.approx(37.04)
    assert k.dram_bytes == 134_143_744 + 110_130_432 and k.dram_gbps == pytest.approx(3762.2, abs=1)
    assert (k.registers_per_thread, k.shared_mem_bytes, k.spill_bytes) == (48, 32, 0)
    assert k.theoretical_occupancy_pct == 62.5 and k.achieved_occupancy_pct == pytest.approx(58.98)
    assert k.occupancy_limiter == "registers"  # 5 blocks by registers vs 8 by warps, 14 by shared memory
    assert k.stalls[0].name == "long_scoreboard" and k.stalls[0].pct > 50
    assert k.global_excess_sectors_pct == pytest.approx(17.9, abs=0.1) and k.shared_excess_wavefronts_pct == 0
    assert k.global_load_bytes_per_sector == pytest.approx(26.25, abs=0.01)
    assert k.wgmma is False and k.tensor_pct == 0
    assert any(r.name == "CPIStall" and (r.est_speedup_pct or 0) > 50 for r in k.ncu_rules)


def test_matmul_kernel_profile() -> None:
    k = _merged("matmul")
    assert k.wgmma is True and k.tensor_pct == pytest.approx(75.34)
    assert (k.registers_per_thread, k.shared_mem_bytes) == (110, 98304)
    assert k.occupancy_limiter == "registers" and k.theoretical_occupancy_pct == 25
    assert k.global_load_bytes_per_sector is None  # no LDG ran: operands came in through cp.async
    assert k.flops == 0  # no FP32 FFMA: the work is on the tensor pipe


def test_cuda_kernel_profile() -> None:
    k = _merged("scale_cuda")
    assert k.name == "scale_kernel" and k.grid == [195313, 1, 1]
    assert k.occupancy_limiter == "warps" and k.registers_per_thread == 16
    assert k.stalls[0].name == "long_scoreboard" and k.stalls[0].pct > 80


def test_details_page_alone_gives_the_same_core_numbers() -> None:
    data = parse_ncu.parse_details_csv(_read("h200_softmax_full_details.csv"))
    k = from_ncu.kernel_profile(data[0])
    full = _merged("softmax")
    for field in ("duration_us", "memory_sol_pct", "compute_sol_pct", "registers_per_thread",
                  "theoretical_occupancy_pct", "achieved_occupancy_pct", "occupancy_limiter"):
        assert getattr(k, field) == getattr(full, field), field


def test_source_page_hotspots() -> None:
    hot = parse_ncu.parse_source_csv(_read("h200_softmax_full_source.csv"))
    top = hot["softmax_kernel"]
    assert top[0].location == "standard.py:170" and top[0].pct > 50  # Triton's max reduction waits on the loads
    assert any(h.location.startswith("softmax_triton.py:") for h in top)
    mm = parse_ncu.parse_source_csv(_read("h200_matmul_full_source.csv"))["matmul_kernel"]
    assert mm[0].location == "matmul_triton.py:18" and "tl.load" in mm[0].text
    assert parse_ncu.parse_source_csv(_read("h200_scale_cuda_full_source.csv")) == {}  # NVRTC without -lineinfo


def test_ncu_rep_files() -> None:
    pytest.importorskip("ncu_report")
    (k,) = parse_ncu.read_ncu_rep(FIX / "h200_softmax_quick.ncu-rep")
    (csv_k,) = parse_ncu.parse_raw_csv(_read("h200_softmax_quick_raw.csv"))
    assert k.name == "softmax_kernel" and k.grid == [8192, 1, 1] and k.block == [256, 1, 1]
    assert k.metrics["gpu__time_duration.sum"] == csv_k.metrics["gpu__time_duration.sum"]
    cpi = [r for r in k.rules if r.name == "CPIStall" and r.est_speedup_pct]
    assert cpi and cpi[0].kind == "OPT" and "@section" not in cpi[0].message
    (s,) = parse_ncu.read_ncu_rep(FIX / "h200_scale_cuda_full.ncu-rep")
    assert s.name == "scale_kernel" and s.grid == [195313, 1, 1]


def test_torch_trace() -> None:
    (k,) = parse_torch.parse_trace(_read("h200_matmul_torch_trace.json"), reps=5)
    assert k.name == "matmul_kernel" and k.source == "torch_profiler" and k.launches == 1
    assert k.grid == [32, 32, 1] and k.block == [256, 1, 1] and k.registers_per_thread == 110
    assert 200 < (k.duration_us or 0) < 240
    assert k.theoretical_occupancy_pct is None  # CUPTI's estimate reads 0 for this launch: unknown, not 0%
    with pytest.raises(KilnInputError):
        parse_torch.parse_trace("not json")


def test_query_metrics_check() -> None:
    available = metrics.parse_query_metrics(_read("h200_query_metrics.txt"))
    full = metrics.parse_query_suffixes(_read("h200_query_metrics_suffix.txt"))
    assert "dram__bytes_read" in available and "sm__pipe_tensor_op_gmma_cycles_active" not in available
    chosen = metrics.choose_metrics(available, "NVIDIA H200", full)
    assert chosen.missing == [] and chosen.checked
    assert chosen.chosen["tensor_pct"] == "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
    wrong_suffix = metrics.choose_metrics(available, "x", {n for n in full if not n.startswith("dram__bytes_read.")})
    assert "dram_bytes_read" in wrong_suffix.missing


def test_import_report_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text('"a","b"\n"1","2"\n')
    with pytest.raises(KilnInputError, match="not an ncu raw CSV"):
        import_report(bad)
    with pytest.raises(KilnInputError, match="not found"):
        import_report(tmp_path / "missing.ncu-rep")
