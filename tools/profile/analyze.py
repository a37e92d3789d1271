"""Analyze: roofline classification against measured peaks, and the findings rule set (pure)."""

from __future__ import annotations

from kiln.tools.profile.records import KernelProfile, Peaks

LAUNCH_BOUND_US = 5.0
NEAR_LIMIT_PCT = 90.0


def compute_dtype(k: KernelProfile, dtype: str) -> str:
    """Which compute roof applies: fp32 kernels on tensor cores run at the TF32 rate."""
    tensor = k.wgmma or (k.sass is not None and k.sass.tensor_core != "none") or (k.tensor_pct or 0) > 5
    if dtype == "fp32":
        return "tf32" if tensor else "fp32"
    return dtype


def roofline(k: KernelProfile, peaks: Peaks, dtype: str) -> KernelProfile:
    """bound, % of roofline, headroom, limiting unit, near_limit."""
    upd: dict[str, object] = {}
    if k.dram_gbps is None and k.dram_bytes and k.duration_us:
        upd["dram_gbps"] = round(k.dram_bytes / (k.duration_us * 1e-6) / 1e9, 1)
    if k.duration_us is not None and k.duration_us < LAUNCH_BOUND_US:
        upd.update(bound="launch", limiting_unit="launch")
        return k.model_copy(update=upd)
    cdt = compute_dtype(k, dtype)
    peak_flops = peaks.matmul_tflops.get(cdt, 0.0) * 1e12
    bw = (peaks.copy_gbps or 0.0) * 1e9
    nbytes, flops, t = k.dram_bytes, k.flops or 0.0, (k.duration_us or 0.0) * 1e-6
    tensor_flops_unknown = not flops and (k.tensor_pct or 0) > 5  # ncu's FP32 instruction counts miss MMA work
    if not nbytes or not t or not bw or not peak_flops or tensor_flops_unknown:
        return k.model_copy(update=_sol_only(k))
    ai = flops / nbytes
    ridge = peak_flops / bw
    if ai < ridge:
        achieved_pct = 100.0 * (nbytes / t) / bw
        upd.update(bound="memory", limiting_unit=_memory_unit(k, _dram_vs_copy(nbytes / t, peaks)))
    else:
        achieved_pct = 100.0 * (flops / t) / peak_flops
        upd.update(bound="compute", limiting_unit="tensor" if cdt in {"tf32", "bf16", "fp16"} else "fma")
    upd.update(arithmetic_intensity=round(ai, 3), roofline_pct=round(achieved_pct, 1),
               headroom_x=round(100.0 / achieved_pct, 2) if achieved_pct > 0 else None,
               near_limit=achieved_pct >= NEAR_LIMIT_PCT,
               achieved_tflops=round(flops / t / 1e12, 2) if flops else None)
    return k.model_copy(update=upd)


ONCHIP_MARGIN_PCT = 15.0


def _dram_vs_copy(bytes_per_s: float, peaks: Peaks) -> float | None:
    return 100.0 * bytes_per_s / (peaks.copy_gbps * 1e9) if peaks.copy_gbps else None


def _memory_unit(k: KernelProfile, dram_rel_pct: float | None = None) -> str:
    """DRAM unless L1 or L2 is clearly busier than DRAM. DRAM is judged against the measured copy
    bandwidth when known: ncu's DRAM % is of a theoretical peak no copy reaches."""
    dram = dram_rel_pct if dram_rel_pct is not None else k.dram_pct
    onchip = {u: v for u, v in (("l2", k.l2_pct), ("l1", k.l1_pct)) if v is not None}
    if not onchip or dram is None:
        return "dram"
    best = max(onchip, key=lambda u: onchip[u])
    return best if onchip[best] >= 60 and onchip[best] > dram + ONCHIP_MARGIN_PCT else "dram"


def _sol_only(k: KernelProfile) -> dict[str, object]:
    """No FLOPs, bytes or peaks (an imported report): judge by ncu's speed-of-light percentages. A busy
    tensor pipe means compute-bound even when L2 traffic (a GEMM's operand reuse) raises memory SOL."""
    mem, comp, tensor = k.memory_sol_pct, k.compute_sol_pct, k.tensor_pct or 0.0
    if mem is None and comp is None:
        return {}
    if tensor >= 50 or (comp or 0) > (mem or 0):
        unit = "tensor" if tensor > (k.fma_pct or 0) else "fma"
        pct = max(comp or 0, tensor)
        return {"bound": "compute", "limiting_unit": unit, "roofline_pct": pct, "near_limit": pct >= NEAR_LIMIT_PCT}
    return {"bound": "memory", "limiting_unit": _memory_unit(k), "roofline_pct": mem,
            "near_limit": (mem or 0) >= NEAR_LIMIT_PCT}
