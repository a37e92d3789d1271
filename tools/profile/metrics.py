"""The curated Nsight Compute metric set and its check against `ncu --query-metrics`.

Metric names differ between GPU generations, and a wrong name does not fail a run (ncu prints
`n/a`), so the set is filtered once per GPU against the names the card reports and the result is
cached. Each entry lists alternatives in order of preference; the first one the GPU knows wins.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import Field

from kiln.tools.peaks import gpu_slug
from kiln.tools.records import Record

# role -> names to try, best first. About 24 roles: what the roofline, the findings and the digest use.
CURATED: dict[str, tuple[str, ...]] = {
    "duration": ("gpu__time_duration.sum",),
    "compute_sol": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "memory_sol": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_bytes_read": ("dram__bytes_read.sum",),
    "dram_bytes_write": ("dram__bytes_write.sum",),
    "dram_rate": ("dram__bytes.sum.per_second",),
    "l2_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "l1_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
    "achieved_occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy": ("sm__maximum_warps_per_active_cycle_pct",),
    "regs": ("launch__registers_per_thread",),
    "smem_static": ("launch__shared_mem_per_block_static",),
    "smem_dynamic": ("launch__shared_mem_per_block_dynamic",),
    "waves": ("launch__waves_per_multiprocessor",),
    "ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "ld_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",),
    "st_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",),
    "bank_ld": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "bank_st": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "local_bytes_ld": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",),
    "local_bytes_st": ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",),
    "fma_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",),
    "tensor_pct": (
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    ),
    "gmma_inst": ("sm__inst_executed_pipe_tensor_op_gmma.sum",),
    "ffma": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",),
    "fadd": ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",),
    "fmul": ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",),
}

# Roles whose metric only the sections provide (ncu does not list it in --query-metrics, so it is never
# passed to --metrics; the Occupancy section reports it).
SECTION_ONLY = {"theoretical_occupancy"}

SECTIONS_QUICK = ("SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats")
SECTIONS_FULL = SECTIONS_QUICK + ("MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "SourceCounters")

_NAME = re.compile(r"^([a-z0-9]+__[A-Za-z0-9_]+)\b")


class MetricSet(Record):
    """The curated set as checked against one GPU's `ncu --query-metrics`."""

    gpu_name: str = ""
    chosen: dict[str, str] = Field(default_factory=dict, description="role -> metric name")
    missing: list[str] = Field(default_factory=list, description="roles with no name on this GPU")
    checked: bool = Field(False, description="False: not checked against ncu, the first names are used")


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names from `ncu --query-metrics` output (pure)."""
    names: set[str] = set()
    for line in text.splitlines():
        m = _NAME.match(line.strip())
        if m:
            names.add(m.group(1))
    return names


_FULL = re.compile(r"^([a-z0-9]+__[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)+)\s")


def parse_query_suffixes(text: str) -> set[str]:
    """Full names (with rollup and submetric) from `--query-metrics-mode suffix --metrics ...` (pure)."""
    return {m.group(1) for line in text.splitlines() if (m := _FULL.match(line.strip() + " "))}


def base_name(metric: str) -> str:
    """`dram__bytes_read.sum` -> `dram__bytes_read` (what --query-metrics lists)."""
    return metric.split(".", 1)[0]


def choose_metrics(available: set[str], gpu_name: str = "", full: set[str] | None = None) -> MetricSet:
    """Pick, per role, the first name the GPU knows (pure): its base in `available` and, when the
    suffix listing `full` is given, the whole name in it. `launch__*` are always present."""
    chosen: dict[str, str] = {}
    missing: list[str] = []

    def known(n: str) -> bool:
        if n.startswith("launch__"):
            return True
        return base_name(n) in available and (full is None or "." not in n or n in full)

    for role, names in CURATED.items():
        if role in SECTION_ONLY:
            continue
        hit = next((n for n in names if known(n)), None)
        if hit is None:
            missing.append(role)
        else:
            chosen[role] = hit
    return MetricSet(gpu_name=gpu_name, chosen=chosen, missing=missing, checked=True)


def unchecked_metrics() -> MetricSet:
    """The first name of every role, used when `--query-metrics` could not be read."""
    return MetricSet(chosen={r: n[0] for r, n in CURATED.items() if r not in SECTION_ONLY}, checked=False)


def load_cached(cache_dir: Path, gpu_name: str) -> MetricSet | None:
    path = cache_dir / f"metrics-{gpu_slug(gpu_name)}.json"
    if not path.is_file():
        return None
    try:
        return MetricSet.model_validate_json(path.read_text())
    except ValueError:
        return None


def save_cached(cache_dir: Path, mset: MetricSet) -> Path:
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"metrics-{gpu_slug(mset.gpu_name)}.json"
    path.write_text(json.dumps(mset.model_dump(), indent=1))
    return path
