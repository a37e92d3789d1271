"""GpuFacts for the prompts, read from the machine (never hard-coded).

Device properties come from a short subprocess, so the graph's own process never creates a CUDA
context. Measured copy bandwidth and matmul rates come from kiln's peak cache
(`kiln.tools.integrity.peaks`) when that module is present; otherwise they are left unknown and
the prompts say "not measured".
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from kiln.agents.base import GpuFacts

_PROBE = r"""
import json, torch
i = int(__import__("sys").argv[1])
if not torch.cuda.is_available():
    print(json.dumps(None)); raise SystemExit
p = torch.cuda.get_device_properties(i)
get = lambda *names: next((getattr(p, n) for n in names if getattr(p, n, None)), None)
print(json.dumps({
    "name": p.name,
    "sm_count": p.multi_processor_count,
    "capability": f"{p.major}.{p.minor}",
    "smem_per_sm_bytes": get("shared_memory_per_multiprocessor", "max_shared_memory_per_multiprocessor"),
    "l2_bytes": get("L2_cache_size", "l2_cache_size"),
}))
"""


def probe_device(gpu_index: int = 0, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """Device properties of one GPU as a dict, or None when there is no usable GPU."""
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE, str(gpu_index)], capture_output=True,
                             text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        lines = out.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def measured_rates(device: str) -> tuple[float | None, dict[str, float]]:
    """(copy GB/s, {dtype: TFLOP/s}) from kiln's peak cache, when the integrity tools provide it."""
    try:
        from kiln.tools.integrity import peaks
    except ImportError:
        return None, {}
    copy_gbps: float | None = None
    tflops: dict[str, float] = {}
    for dtype in ("fp32", "bf16", "fp16"):
        try:
            p = peaks.get_peaks(device, dtype)
        except Exception:  # noqa: BLE001 - a missing or failed measurement leaves the fact unknown
            continue
        copy_gbps = copy_gbps or _first(p, ("copy_gbps", "peak_gbps", "dram_gbps", "bandwidth_gbps"))
        rate = _first(p, ("tflops", "peak_tflops", "matmul_tflops"))
        if rate:
            tflops[dtype] = round(float(rate), 1)
    return copy_gbps, tflops


def _first(obj: Any, names: tuple[str, ...]) -> float | None:
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, int | float) and value > 0:
            return float(value)
    return None


def read_gpu_facts(device: str, gpu_index: int = 0) -> GpuFacts:
    """Facts for `device` ("cuda" or "cpu"); a CUDA request with no usable GPU yields CPU facts."""
    if device != "cuda":
        return GpuFacts()
    props = probe_device(gpu_index)
    if props is None:
        return GpuFacts()
    copy_gbps, tflops = measured_rates("cuda")
    return GpuFacts(device="cuda", copy_gbps=copy_gbps, tflops=tflops, **props)
