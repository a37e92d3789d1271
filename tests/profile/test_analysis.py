"""Roofline classification, the findings rule set and the digest, on hand-built kernel entries."""

from __future__ import annotations

from kiln.tools.profile.analyze import roofline
from kiln.tools.profile.api import analyze
from kiln.tools.profile.findings import kernel_findings, report_findings
from kiln.tools.profile.records import KernelProfile, NcuRule, Peaks, ProfileReport, SassSummary, StallReason
from kiln.tools.profile.render import render_digest

# The H200 numbers, fixed here so the arithmetic below stays checkable by hand.
H200 = Peaks(gpu_name="NVIDIA H200", source="recorded", copy_gbps=4250.0, sm_count=132,
             matmul_tflops={"fp32": 51.0, "tf32": 378.0, "bf16": 688.0, "fp16": 688.0})


def _k(**kw: object) -> KernelProfile:
    return KernelProfile(**{"name": "k", "source": "ncu", **kw})  # type: ignore[arg-type]


def test_launch_bound_under_5us() -> None:
    k = roofline(_k(duration_us=3.0, dram_bytes=1e6), H200, "fp32")
    assert (k.bound, k.limiting_unit) == ("launch", "launch")


def test_memory_bound_softmax_near_limit() -> None:
    # 268 MB in 66 us = 4.06 TB/s of 4.25: 96% of the memory roof
    k = roofline(_k(duration_us=66.0, dram_bytes=2.68e8, flops=1.7e8), H200, "fp32")
    assert k.bound == "memory" and k.limiting_unit == "dram"
    assert 95 < (k.roofline_pct or 0) < 97 and k.near_limit
    assert k.arithmetic_intensity is not None and k.arithmetic_intensity < 1


def test_compute_bound_matmul_uses_the_dtype_roof() -> None:
    # 2*4096^3 FLOP in 400 us = 344 TFLOP/s of bf16's 688: 50%
    k = roofline(_k(duration_us=400.0, dram_bytes=1.0e8, flops=2 * 4096**3, wgmma=True), H200, "bf16")
    assert (k.bound, k.limiting_unit) == ("compute", "tensor")
    assert 49 < (k.roofline_pct or 0) < 51 and not k.near_limit
    assert k.headroom_x and 1.9 < k.headroom_x < 2.1


def test_fp32_on_tensor_cores_is_judged_against_tf32() -> None:
    k = roofline(_k(duration_us=1000.0, dram_bytes=2e8, flops=2 * 4096**3, sass=SassSummary(kernel="k", tensor_core="hmma")),
                 H200, "fp32")
    assert k.limiting_unit == "tensor" and (k.roofline_pct or 0) < 50  # 137 TFLOP/s of tf32's 378


def test_high_memory_sol_with_low_dram_points_at_l1() -> None:
    k = roofline(_k(duration_us=50.0, dram_bytes=2e7, memory_sol_pct=85, dram_pct=12, l1_pct=85, l2_pct=30), H200, "fp32")
    assert k.bound == "memory" and k.limiting_unit == "l1"
    rules = {f.rule for f in kernel_findings(k, H200)}
    assert "memory.onchip-bound" in rules


def test_occupancy_advice_is_dropped_for_a_gemm_near_its_roofline() -> None:
    gemm = dict(duration_us=210.0, dram_bytes=1.0e8, flops=2 * 4096**3, wgmma=True, theoretical_occupancy_pct=12.5,
                occupancy_limiter="registers", registers_per_thread=232,
                ncu_rules=[NcuRule(name="AchievedOccupancy", kind="OPT", message="raise occupancy", est_speedup_pct=30)])
    near = roofline(_k(**gemm), H200, "bf16")  # 654 TFLOP/s: 95% of 688
    assert near.near_limit
    rules = {f.rule for f in kernel_findings(near, H200)}
    assert "roofline.near-limit" in rules and "occupancy.registers" not in rules
    assert not any(r.startswith("ncu.AchievedOccupancy") for r in rules)
    far = roofline(_k(**{**gemm, "duration_us": 600.0}), H200, "bf16")
    far_rules = {f.rule for f in kernel_findings(far, H200)}
    assert "occupancy.registers" in far_rules and "ncu.AchievedOccupancy" in far_rules


def test_each_rule_fires_with_its_evidence() -> None:
    k = roofline(_k(duration_us=80.0, dram_bytes=5e7, grid=[64, 1, 1], global_load_bytes_per_sector=4.0,
                    stalls=[StallReason(name="long_scoreboard", pct=71.0)], bank_conflicts=250_000, spill_bytes=4096,
                    registers_per_thread=255), H200, "fp32")
    found = {f.rule: f.message for f in kernel_findings(k, H200)}
    assert "4.0 of 32 bytes" in found["memory.uncoalesced"]
    assert "71%" in found["stall.long-scoreboard"]
    assert "250,000" in found["shared.bank-conflicts"]
    assert "4,096 B" in found["registers.spills"] and "255 regs" in found["registers.spills"]
    assert "64 blocks for 132 SMs" in found["waves.too-few-blocks"]


def test_compute_bound_without_tensor_cores() -> None:
    k = roofline(_k(duration_us=900.0, dram_bytes=1e8, flops=2 * 4096**3, sass=SassSummary(kernel="k")), H200, "fp32")
    assert k.bound == "compute" and k.limiting_unit == "fma"
    assert "tensor.unused" in {f.rule for f in kernel_findings(k, H200)}


def test_many_small_launches() -> None:
    ks = [_k(name=f"k{i}", duration_us=3.0, launches=2) for i in range(3)]
    (f,) = report_findings(ks)
    assert f.rule == "launch.many-small" and "6 launches" in f.message
    assert report_findings(ks[:1]) == []


def test_digest_is_compact_and_round_trips() -> None:
    kernels = [_k(name=f"kernel_{i}", duration_us=100.0 - i, dram_bytes=2e8, grid=[8192, 1, 1], block=[256, 1, 1],
                  stalls=[StallReason(name="long_scoreboard", pct=60)], sass=SassSummary(kernel="k")) for i in range(6)]
    report = analyze(ProfileReport(source="ncu", candidate="c.py", peaks=H200, kernels=kernels, gpu_name="NVIDIA H200"))
    text = render_digest(report)
    assert 15 <= len(text.splitlines()) <= 40
    assert text.startswith("# profile (ncu)") and "3 more kernel(s)" in text
    assert ProfileReport.model_validate_json(report.model_dump_json()) == report
