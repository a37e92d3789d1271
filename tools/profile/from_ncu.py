"""Parse: turn one kernel's ncu metric table (raw names, or the details page's display names) into a
`KernelProfile` (pure)."""

from __future__ import annotations

import re

from kiln.tools.profile.metrics import CURATED
from kiln.tools.profile.parse_ncu import NcuKernelData
from kiln.tools.profile.records import KernelProfile, StallReason

# role -> details-page "Section/Metric Name" keys, for reports that only have the details page.
DISPLAY: dict[str, tuple[str, ...]] = {
    "duration": ("GPU Speed Of Light Throughput/Duration",),
    "compute_sol": ("GPU Speed Of Light Throughput/Compute (SM) Throughput",),
    "memory_sol": ("GPU Speed Of Light Throughput/Memory Throughput",),
    "dram_pct": ("GPU Speed Of Light Throughput/DRAM Throughput",),
    "l2_pct": ("GPU Speed Of Light Throughput/L2 Cache Throughput",),
    "l1_pct": ("GPU Speed Of Light Throughput/L1/TEX Cache Throughput",),
    "achieved_occupancy": ("Occupancy/Achieved Occupancy",),
    "theoretical_occupancy": ("Occupancy/Theoretical Occupancy",),
    "regs": ("Launch Statistics/Registers Per Thread",),
    "smem_static": ("Launch Statistics/Static Shared Memory Per Block",),
    "smem_dynamic": ("Launch Statistics/Dynamic Shared Memory Per Block",),
    "waves": ("Launch Statistics/Waves Per SM",),
    "dram_rate": ("Memory Workload Analysis/Memory Throughput",),
}
LIMITS = {"registers": "launch__occupancy_limit_registers", "shared_mem": "launch__occupancy_limit_shared_mem",
          "warps": "launch__occupancy_limit_warps", "blocks": "launch__occupancy_limit_blocks"}
LIMITS_DISPLAY = {"registers": "Occupancy/Block Limit Registers", "shared_mem": "Occupancy/Block Limit Shared Mem",
                  "warps": "Occupancy/Block Limit Warps", "blocks": "Occupancy/Block Limit SM"}
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_PCSAMP = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+)$")


def get(d: NcuKernelData, role: str) -> float | None:
    for name in (*CURATED.get(role, ()), *DISPLAY.get(role, ())):
        if name in d.metrics:
            return d.metrics[name]
    return None


def _int(v: float | None) -> int | None:
    return int(v) if v is not None else None


def _sum(*vals: float | None) -> float | None:
    present = [v for v in vals if v is not None]
    return sum(present) if present else None


def occupancy_limiter(d: NcuKernelData) -> str | None:
    """The resource allowing the fewest blocks per SM (ties: registers, then shared memory)."""
    limits = {k: d.metrics.get(n, d.metrics.get(LIMITS_DISPLAY[k])) for k, n in LIMITS.items()}
    present = {k: v for k, v in limits.items() if v is not None}
    if not present:
        return None
    return min(present, key=lambda k: (present[k], list(LIMITS).index(k)))


def stalls(d: NcuKernelData, top: int = 4) -> list[StallReason]:
    """Top stall reasons as a share of all stalls (WarpStateStats ratios, else PC samples)."""
    for pattern in (_STALL, _PCSAMP):
        found = {m.group(1): v for n, v in d.metrics.items() if (m := pattern.match(n))}
        found = {k: v for k, v in found.items() if k not in {"selected", "not_selected"} and v > 0}
        total = sum(found.values())
        if total > 0:
            best = sorted(found.items(), key=lambda kv: -kv[1])[:top]
            return [StallReason(name=k, pct=round(100.0 * v / total, 1)) for k, v in best]
    return []


def flops_from_counts(d: NcuKernelData) -> float | None:
    """FP32 FLOPs from SASS thread-instruction counts (an FMA is 2); None if not collected."""
    ffma, fadd, fmul = get(d, "ffma"), get(d, "fadd"), get(d, "fmul")
    if ffma is None and fadd is None and fmul is None:
        return None
    return 2 * (ffma or 0) + (fadd or 0) + (fmul or 0)


def kernel_profile(d: NcuKernelData) -> KernelProfile:
    dur_ns = get(d, "duration")
    dram = _sum(get(d, "dram_bytes_read"), get(d, "dram_bytes_write"))
    smem = _sum(get(d, "smem_static"), get(d, "smem_dynamic"))
    local = _sum(get(d, "local_bytes_ld"), get(d, "local_bytes_st"))
    rate = get(d, "dram_rate")
    if rate is None and dram is not None and dur_ns:
        rate = dram / (dur_ns * 1e-9)
    gmma = get(d, "gmma_inst")
    return KernelProfile(
        name=d.name, source="ncu", duration_us=dur_ns / 1e3 if dur_ns is not None else None,
        grid=d.grid, block=d.block, memory_sol_pct=get(d, "memory_sol"), compute_sol_pct=get(d, "compute_sol"),
        dram_gbps=rate / 1e9 if rate is not None else None, dram_bytes=dram, dram_pct=get(d, "dram_pct"),
        l2_pct=get(d, "l2_pct"), l1_pct=get(d, "l1_pct"), fma_pct=get(d, "fma_pct"), tensor_pct=get(d, "tensor_pct"),
        flops=flops_from_counts(d), achieved_occupancy_pct=get(d, "achieved_occupancy"),
        theoretical_occupancy_pct=get(d, "theoretical_occupancy"), occupancy_limiter=occupancy_limiter(d),
        registers_per_thread=_int(get(d, "regs")), shared_mem_bytes=_int(smem), spill_bytes=_int(local),
        waves_per_sm=get(d, "waves"), stalls=stalls(d),
        global_load_bytes_per_sector=_bytes_per_sector(get(d, "ld_bytes_per_sector")),
        global_store_bytes_per_sector=_bytes_per_sector(get(d, "st_bytes_per_sector")),
        global_excess_sectors_pct=_excess_pct(d, "derived__memory_l2_theoretical_sectors_global_excessive",
                                              "memory_l2_theoretical_sectors_global"),
        bank_conflicts=_int(_sum(get(d, "bank_ld"), get(d, "bank_st"))),
        shared_wavefronts=_int(d.metrics.get("memory_l1_wavefronts_shared")),
        shared_excess_wavefronts_pct=_excess_pct(d, "derived__memory_l1_wavefronts_shared_excessive",
                                                 "memory_l1_wavefronts_shared"),
        wgmma=(gmma > 0) if gmma is not None else None, ncu_rules=d.rules, hotspots=d.hotspots,
    )


def _bytes_per_sector(pct: float | None) -> float | None:
    """ncu reports bytes used per 32-byte sector as a % of 32; 0 means no LDG/STG ran (e.g. all loads
    went through cp.async or TMA), which says nothing about coalescing."""
    return round(pct * 32 / 100, 2) if pct else None


def _excess_pct(d: NcuKernelData, excess: str, total: str) -> float | None:
    """SourceCounters' excess sectors/wavefronts (counted in sectors, whatever the unit says) over all."""
    ex, tot = d.metrics.get(excess), d.metrics.get(total)
    if ex is None or not tot:
        return None
    return round(100.0 * ex / tot, 1)


def merge(raw: list[NcuKernelData], details: list[NcuKernelData]) -> list[NcuKernelData]:
    """Raw metrics plus the details page's rules and display-only values, matched by launch ID."""
    by_id = {d.id: d for d in details}
    out = []
    for r in raw:
        d = by_id.pop(r.id, None)
        if d is not None:
            metrics = {**d.metrics, **r.metrics}
            r = r.model_copy(update={"metrics": metrics, "rules": r.rules or d.rules, "text": {**d.text, **r.text}})
        out.append(r)
    return out + list(by_id.values())
