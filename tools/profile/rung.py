"""Which profiling rung works on this machine, and why (`kiln doctor`, and the default rung)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kiln.tools.peaks import gpu_slug
from kiln.tools.profile import ncu
from kiln.tools.profile.records import RungInfo
from kiln.tools.profile.toolchain import available_tools

PROBE = "import torch; x = torch.ones(8, device='cuda'); x.add_(1); torch.cuda.synchronize()"
PROBE_TTL_S = 24 * 3600


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kiln" / "profile"


def gpu_name() -> str | None:
    """The first GPU's name through NVML (no CUDA context in this process); None without a GPU."""
    try:
        import pynvml  # noqa: PLC0415 - nvidia-ml-py, optional at runtime

        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount() == 0:
                return None
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            return name.decode() if isinstance(name, bytes) else str(name)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library, no GPU: all mean "no GPU"
        return None


def probe_counters(timeout_s: float = 90.0) -> tuple[bool, str]:
    """Profile one tiny kernel with one metric: can this user read the counters?"""
    run = ncu.run_ncu(["--metrics", "gpu__time_duration.sum", "--launch-count", "1", "--clock-control", "none",
                       "--target-processes", "all", sys.executable, "-c", PROBE], timeout_s=timeout_s)
    if run.error:
        return False, run.error
    if "gpu__time_duration.sum" not in run.stdout:
        return False, "ncu ran but profiled no kernel"
    return True, "ncu read hardware counters"


def _cached_probe(cache_dir: Path, key: str) -> tuple[bool, str] | None:
    path = cache_dir / f"rung-{key}.json"
    if not path.is_file() or time.time() - path.stat().st_mtime > PROBE_TTL_S:
        return None
    try:
        info = RungInfo.model_validate_json(path.read_text())
    except ValueError:
        return None
    return bool(info.counters), info.reason.removeprefix("counters refused: ")


def detect_rung(cache_dir: Path | None = None, *, probe: bool = True) -> RungInfo:
    """ncu if it can read counters; else the torch profiler if there is a GPU; else static (compile
    and disassemble only) if nvcc/cuobjdump exist; else none."""
    cache_dir = cache_dir or default_cache_dir()
    tools = available_tools()
    gpu = gpu_name()
    if gpu is None:
        rung = "static" if tools else "none"
        why = "no CUDA GPU: compile-only SASS and ptxas summaries" if tools else "no CUDA GPU and no CUDA tools"
        return RungInfo(rung=rung, reason=why, sass_tools=tools)
    exe = ncu.find_ncu()
    if exe is None:
        return RungInfo(rung="torch_profiler", reason="ncu not found: torch profiler (CUPTI) and compiled metadata",
                        gpu_name=gpu, sass_tools=tools)
    version = ncu.parse_version(ncu.run_ncu(["--version"], timeout_s=30).stdout)
    key = f"{gpu_slug(gpu)}-{gpu_slug(version or '')}-{os.getuid()}"
    result = _cached_probe(cache_dir, key) or (probe_counters() if probe else None)
    if result is None:
        return RungInfo(rung="ncu", reason="ncu found (counter access not probed)", ncu_path=exe,
                        ncu_version=version, gpu_name=gpu, sass_tools=tools)
    ok, why = result
    info = RungInfo(rung="ncu" if ok else "torch_profiler", reason=why if ok else f"counters refused: {why}",
                    ncu_path=exe, ncu_version=version, counters=ok, gpu_name=gpu, sass_tools=tools)
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / f"rung-{key}.json").write_text(info.model_dump_json(indent=1))
    return info
