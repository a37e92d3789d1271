"""Analyze: the findings rule set. Each rule is one line with its evidence numbers (pure)."""

from __future__ import annotations

from collections.abc import Callable

from kiln.tools.profile.records import KernelProfile, Peaks, ProfileFinding

Rule = Callable[[KernelProfile, Peaks], ProfileFinding | None]
OCCUPANCY_RULES = ("Occupancy", "AchievedOccupancy", "TheoreticalOccupancy")


def _f(rule: str, msg: str, severity: str = "warn") -> ProfileFinding:
    return ProfileFinding(rule=rule, message=msg, severity=severity)


def near_limit(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    if not k.near_limit:
        return None
    return _f("roofline.near-limit", f"{k.roofline_pct:.0f}% of the {k.bound} roofline ({k.limiting_unit}): "
              "near the hardware limit, further tuning has little to gain", "info")


def occupancy(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    """Register/shared-memory-limited occupancy; silent for kernels already near their roofline."""
    occ, lim = k.theoretical_occupancy_pct, k.occupancy_limiter
    if k.near_limit or occ is None or occ >= 50 or lim not in {"registers", "shared_mem"}:
        return None
    detail = f"{k.registers_per_thread} regs/thread" if lim == "registers" else f"{k.shared_mem_bytes} B smem/block"
    achieved = f", achieved {k.achieved_occupancy_pct:.0f}%" if k.achieved_occupancy_pct is not None else ""
    return _f(f"occupancy.{lim.replace('_', '-')}", f"theoretical occupancy {occ:.0f}%{achieved}, limited by {detail}")


def uncoalesced(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    bps = k.global_load_bytes_per_sector
    if bps is not None and bps < 16:
        return _f("memory.uncoalesced", f"global loads use {bps:.1f} of 32 bytes per sector: uncoalesced or strided access")
    ex = k.global_excess_sectors_pct
    if ex is not None and ex >= 10:
        return _f("memory.uncoalesced", f"{ex:.0f}% of global sectors are excess over the ideal: misaligned rows "
                  "(pad the stride to 16 B) or uncoalesced access", "warn" if ex >= 25 else "info")
    mem, dram = k.memory_sol_pct, k.dram_pct
    if k.bound == "compute":  # a GEMM lives in L2 and shared memory by design
        return None
    if mem is not None and dram is not None and mem >= 60 and dram < mem / 2:
        return _f("memory.onchip-bound", f"memory SOL {mem:.0f}% but DRAM only {dram:.0f}%: L1/L2 traffic dominates "
                  "(uncoalesced access, re-reads, or a grid too small to pull DRAM bandwidth)")
    return None


def long_scoreboard(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    top = next((s for s in k.stalls if s.name == "long_scoreboard"), None)
    if top is None or top.pct < 40:
        return None
    return _f("stall.long-scoreboard", f"{top.pct:.0f}% of stalls wait on global/local memory (long scoreboard): "
              "prefetch, more bytes in flight per thread, or more warps")


def bank_conflicts(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    """Excess shared wavefronts when SourceCounters measured them (the raw conflict counter also counts
    arbitration stalls, so it fires on healthy kernels); else the counter, above a floor."""
    ex = k.shared_excess_wavefronts_pct
    if ex is not None:
        if ex < 10:
            return None
        return _f("shared.bank-conflicts", f"{ex:.0f}% of shared-memory wavefronts are bank-conflict replays: "
                  "pad or swizzle the tile")
    n = k.bank_conflicts
    if not n or n < 10_000:
        return None
    return _f("shared.bank-conflicts", f"{n:,} shared-memory bank conflicts (counter; level full measures the "
              "excess wavefronts): pad or swizzle the tile", "info")


def spills(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    sass_local = (k.sass.local_loads + k.sass.local_stores) if k.sass else 0
    if not k.spill_bytes and not sass_local:
        return None
    evidence = []
    if k.spill_bytes:
        evidence.append(f"{k.spill_bytes:,} B local memory traffic")
    if sass_local:
        evidence.append(f"{sass_local} LDL/STL instructions")
    regs = f" at {k.registers_per_thread} regs/thread" if k.registers_per_thread else ""
    return _f("registers.spills", f"register spills{regs}: " + ", ".join(evidence))


def waves(k: KernelProfile, peaks: Peaks) -> ProfileFinding | None:
    if k.grid is None or not peaks.sm_count:
        return None
    blocks = k.grid[0] * k.grid[1] * k.grid[2]
    if blocks >= peaks.sm_count:
        return None
    return _f("waves.too-few-blocks", f"grid of {blocks} blocks for {peaks.sm_count} SMs: "
              f"{peaks.sm_count - blocks} SMs idle; split the work (split-K, smaller tiles)")


def no_tensor_cores(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    if k.bound != "compute" or k.limiting_unit == "tensor":
        return None
    sass_none = k.sass is not None and k.sass.tensor_core == "none"
    if not sass_none and k.wgmma is not False:
        return None
    ai = f" (intensity {k.arithmetic_intensity:.0f} FLOP/B)" if k.arithmetic_intensity else ""
    return _f("tensor.unused", f"compute-bound{ai} with no tensor-core instructions: use tl.dot / wgmma / mma")


def narrow_loads(k: KernelProfile, _: Peaks) -> ProfileFinding | None:
    if k.sass is None or k.bound != "memory" or k.near_limit or not k.sass.global_load_widths_bits:
        return None  # near the memory roof the bytes, not the instruction count, are the limit
    widths = k.sass.global_load_widths_bits
    if "128" in widths or "64" in widths:
        return None
    return _f("sass.narrow-loads", f"memory-bound with only 32-bit global loads ({sum(widths.values())} LDG): "
              "128-bit vector loads move the same bytes with a quarter of the instructions", "info")


def ncu_rules(k: KernelProfile, _: Peaks, top: int = 2) -> list[ProfileFinding]:
    """ncu's own advice with an estimated speedup; occupancy advice dropped for near-limit kernels."""
    rules = [r for r in k.ncu_rules if (r.est_speedup_pct or 0) >= 5 and r.message]
    if k.near_limit:
        rules = [r for r in rules if not r.name.startswith(OCCUPANCY_RULES)]
    rules.sort(key=lambda r: -(r.est_speedup_pct or 0))
    return [_f(f"ncu.{r.name}", f"ncu {r.name} (est. +{r.est_speedup_pct:.0f}%): {r.message[:160]}", "info")
            for r in rules[:top]]


RULES: tuple[Rule, ...] = (near_limit, occupancy, uncoalesced, long_scoreboard, bank_conflicts, spills, waves,
                           no_tensor_cores, narrow_loads)


def kernel_findings(k: KernelProfile, peaks: Peaks) -> list[ProfileFinding]:
    found = [f for rule in RULES if (f := rule(k, peaks)) is not None]
    return found + ncu_rules(k, peaks)


def report_findings(kernels: list[KernelProfile]) -> list[ProfileFinding]:
    """Many small launches: several kernels (or launches) each under the launch-bound threshold."""
    small = [k for k in kernels if k.duration_us is not None and k.duration_us < 10]
    launches = sum(k.launches for k in small)
    if launches < 4:
        return []
    us = sum((k.duration_us or 0) * k.launches for k in small)
    return [_f("launch.many-small", f"{launches} launches under 10 us each ({us:.1f} us in all): fuse them into fewer kernels")]
