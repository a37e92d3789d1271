"""Typed records of the profiler: what each rung measured, the roofline verdict, the findings.

Units are in the field names (`_us`, `_pct`, `_gbps`, `_tflops`, `_bytes`). Every record round-trips
through JSON. `None` always means "not measured on this rung", never zero.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kiln.tools.peaks import Peaks
from kiln.tools.profile.floors import Floors
from kiln.tools.records import Record

__all__ = ["Floors", "Peaks"]  # kiln's one record of a GPU's ceilings, shared with the physics floor

Rung = Literal["ncu", "torch_profiler", "static", "none"]
"""Where a report's numbers came from: Nsight Compute counters, the torch profiler (CUPTI activity)
plus compiled metadata, compiled metadata only (no GPU run), or nothing usable."""

Bound = Literal["launch", "memory", "compute", "unknown"]
Unit = Literal["dram", "l2", "l1", "fma", "tensor", "launch", "unknown"]



class RungInfo(Record):
    """Which profiling rung works on this machine, and why (what `kiln doctor` prints)."""

    rung: Rung
    reason: str
    ncu_path: str | None = None
    ncu_version: str | None = None
    counters: bool | None = Field(None, description="ncu could read hardware counters (None: not tried)")
    gpu_name: str | None = None
    sass_tools: list[str] = Field(default_factory=list, description="cuobjdump / nvdisasm / nvcc found")


class StallReason(Record):
    name: str = Field(description="e.g. long_scoreboard, barrier, math_pipe_throttle")
    pct: float = Field(description="share of all stall samples or cycles, in %")


class NcuRule(Record):
    """One of Nsight Compute's own rule results."""

    name: str
    kind: str = Field("", description="OPT, WRN, INF, ERR")
    message: str = ""
    est_speedup_pct: float | None = None


class SourceHotspot(Record):
    """A source line with many stall samples (needs line info in the binary)."""

    location: str = Field(description="file:line or a SASS address")
    samples: int
    pct: float
    text: str = ""


class SassSummary(Record):
    """What a kernel engineer reads first in the disassembly."""

    kernel: str
    instructions: int = 0
    global_load_widths_bits: dict[str, int] = Field(default_factory=dict, description="width -> count")
    global_store_widths_bits: dict[str, int] = Field(default_factory=dict)
    tensor_core: Literal["wgmma", "hmma", "none"] = "none"
    tensor_instructions: int = 0
    local_loads: int = Field(0, description="LDL: local memory (spill) loads")
    local_stores: int = Field(0, description="STL")
    shared_loads: int = 0
    shared_stores: int = 0
    async_copies: int = Field(0, description="LDGSTS / UBLKCP / UTMALDG (cp.async, TMA)")
    loop_mix: dict[str, int] = Field(default_factory=dict, description="class -> count in the innermost loop")
    registers: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None


class ProfileFinding(Record):
    """One plain-language finding with its evidence numbers (one line in the digest)."""

    rule: str = Field(description="e.g. occupancy.registers, memory.uncoalesced, waves.too-few-blocks")
    severity: Literal["info", "warn"] = "warn"
    message: str


class KernelProfile(Record):
    """One kernel, merged from whatever the rung measured."""

    name: str
    source: Rung = "none"
    launches: int = 1
    duration_us: float | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    memory_sol_pct: float | None = None
    compute_sol_pct: float | None = None
    dram_gbps: float | None = None
    dram_bytes: float | None = None
    l2_pct: float | None = None
    l1_pct: float | None = None
    dram_pct: float | None = None
    fma_pct: float | None = None
    tensor_pct: float | None = Field(None, description="tensor pipe utilisation, % of peak")
    flops: float | None = Field(None, description="counted FLOPs (ncu instruction counts or the problem's FLOPs)")
    achieved_tflops: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    occupancy_limiter: str | None = Field(None, description="registers, shared_mem, warps, blocks")
    registers_per_thread: int | None = None
    shared_mem_bytes: int | None = Field(None, description="static + dynamic per block")
    spill_bytes: int | None = Field(None, description="local memory bytes (spill stores + loads, or LOCAL)")
    waves_per_sm: float | None = None
    stalls: list[StallReason] = Field(default_factory=list)
    global_load_bytes_per_sector: float | None = Field(None, description="of 32; 32 is fully used")
    global_store_bytes_per_sector: float | None = None
    global_excess_sectors_pct: float | None = Field(
        None, description="global sectors touched beyond the ideal, % of all (misaligned or uncoalesced access)")
    bank_conflicts: int | None = Field(None, description="shared-memory bank-conflict counter (ld + st)")
    shared_wavefronts: int | None = None
    shared_excess_wavefronts_pct: float | None = Field(None, description="shared wavefronts beyond the ideal, %")
    wgmma: bool | None = Field(None, description="the kernel issued wgmma (HGMMA) instructions")
    num_warps: int | None = None
    num_stages: int | None = None
    ncu_rules: list[NcuRule] = Field(default_factory=list)
    hotspots: list[SourceHotspot] = Field(default_factory=list)
    sass: SassSummary | None = None
    bound: Bound = "unknown"
    limiting_unit: Unit = "unknown"
    arithmetic_intensity: float | None = Field(None, description="FLOP per DRAM byte")
    roofline_pct: float | None = Field(None, description="% of the roof at this intensity")
    headroom_x: float | None = Field(None, description="roof / achieved")
    near_limit: bool = False
    findings: list[ProfileFinding] = Field(default_factory=list)


class ProfileReport(Record):
    """The full profile of one candidate (`kiln profile --json` writes this)."""

    kiln_version: str = "0.1.0"
    source: Rung = Field(description="the rung these numbers came from")
    source_detail: str = Field("", description="why this rung, e.g. 'ncu refused: ERR_NVGPUCTRPERM'")
    problem: str = ""
    candidate: str = ""
    level: Literal["quick", "full"] = "quick"
    dtype: str = "fp32"
    gpu_name: str | None = None
    peaks: Peaks | None = None
    kernels: list[KernelProfile] = Field(default_factory=list)
    total_kernel_us: float | None = None
    wall_s: float | None = Field(None, description="time the profiling itself took")
    notes: list[str] = Field(default_factory=list)
    findings: list[ProfileFinding] = Field(default_factory=list, description="report-level findings")
    floors: Floors | None = Field(None, description="the problem's I/O floor and the reference algorithm's floor "
                                                    "on this GPU (issue 25)")
