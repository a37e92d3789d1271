"""GpuFacts for the prompts, read from the machine (never hard-coded).

One short subprocess reads the device properties and kiln's measured peaks
(`kiln.tools.peaks`: copy bandwidth and matmul rates, measured once per GPU and
cached on disk), so the graph's own process never creates a CUDA context. A fact that cannot be
read is left unknown and the prompts say "not measured".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from kiln.agents.base import GpuFacts

_PROBE = r"""
import json, torch
i = int(__import__("sys").argv[1])
if not torch.cuda.is_available():
    print(json.dumps(None)); raise SystemExit
p = torch.cuda.get_device_properties(i)
get = lambda *names: next((getattr(p, n) for n in names if getattr(p, n, None)), None)
def peaks():
    try:
        from kiln.tools import peaks as kp
        pk = kp.cached(i) or kp.known(p.name)
    except Exception:
        return {}
    rates = {d: round(float(r), 1) for d, r in (pk.matmul_tflops or {}).items() if r}
    return {"copy_gbps": round(pk.copy_gbps, 1) if pk.copy_gbps else None, "tflops": rates}
print(json.dumps({
    "name": p.name,
    "sm_count": p.multi_processor_count,
    "capability": f"{p.major}.{p.minor}",
    "smem_per_sm_bytes": get("shared_memory_per_multiprocessor", "max_shared_memory_per_multiprocessor"),
    "l2_bytes": get("L2_cache_size", "l2_cache_size"),
    **peaks(),
}))
"""


def nvidia_present() -> bool:
    """A cheap test before spawning torch: no driver device node and no nvidia-smi means no GPU."""
    return Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None


def probe_device(gpu_index: int = 0, timeout_s: float = 180.0) -> dict[str, Any] | None:
    """Device properties and measured peaks of one GPU as a dict, or None when there is no usable GPU."""
    if not nvidia_present():
        return None
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


def read_gpu_facts(device: str, gpu_index: int = 0) -> GpuFacts:
    """Facts for `device` ("cuda" or "cpu"); a CUDA request with no usable GPU yields CPU facts."""
    if device != "cuda":
        return GpuFacts()
    props = probe_device(gpu_index)
    if props is None:
        return GpuFacts()
    return GpuFacts(device="cuda", **props)
