"""Where a number was measured: GPU, driver, versions, SM clock, temperature, throttle reasons (NVML).

Works on a CPU-only machine or without NVML: the NVML fields are then None. Never initializes CUDA:
the NVML device is found from torch's device UUID when CUDA is already up in this process, else
from CUDA_VISIBLE_DEVICES, else by index.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import platform
import sys
from typing import Any

from kiln.tools.records import EnvRecord

# NVML clock-event ("throttle") reason bits; the ones that mean the clock was held down for us.
REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
THROTTLING = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}


@functools.cache
def _nvml() -> Any | None:
    """pynvml, initialized once per process (the timing loop samples it after every batch)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no NVML library, no driver, no GPU: all mean "no NVML"
        return None


def nvml_index(gpu_index: int) -> int:
    """NVML's index of this process's CUDA device `gpu_index` (CUDA_VISIBLE_DEVICES renumbers)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if ids and gpu_index < len(ids) and ids[gpu_index].isdigit():
        return int(ids[gpu_index])
    return gpu_index


def _handle(nv: Any, gpu_index: int) -> Any:
    uuid = _torch_uuid(gpu_index)
    if uuid:
        try:
            return nv.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:  # noqa: BLE001 - fall back to the index mapping
            pass
    return nv.nvmlDeviceGetHandleByIndex(nvml_index(gpu_index))


def _torch_uuid(gpu_index: int) -> str | None:
    torch = sys.modules.get("torch")  # not imported: no CUDA context here either (and no import for it)
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        u = str(torch.cuda.get_device_properties(gpu_index).uuid)
        return u if u.startswith("GPU-") else f"GPU-{u}"
    except Exception:  # noqa: BLE001 - older torch without .uuid
        return None


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def _reasons(nv: Any, h: Any) -> list[str]:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return decode_reasons(int(fn(h)))


def _clock_temp(nv: Any, h: Any) -> tuple[int | None, int | None]:
    try:
        return int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)), int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
    except Exception:  # noqa: BLE001 - some fields are unsupported on some boards
        return None, None


def _versions(device: str) -> dict[str, Any]:
    lib = library_versions()
    return {"device": device, "torch": lib["torch"], "triton": lib["triton"], "cuda": lib["cuda"],
            "python": platform.python_version()}


@functools.cache
def library_versions() -> dict[str, str | None]:
    """torch's version and CUDA version and Triton's version, read from their installed files when
    they are not imported yet: kiln's own process records them (and keys its caches by them) without
    paying torch's import (1-2.5 s) in a `kiln check` whose workers do the tensor work."""
    torch_mod, triton_mod = sys.modules.get("torch"), sys.modules.get("triton")
    tv = _module_constants("torch.version", ("__version__", "cuda")) if torch_mod is None else \
        {"__version__": torch_mod.__version__, "cuda": torch_mod.version.cuda}
    if tv is None:
        import torch

        tv = {"__version__": torch.__version__, "cuda": torch.version.cuda}
    if triton_mod is not None:
        trv: str | None = getattr(triton_mod, "__version__", None)
    else:
        consts = _module_constants("triton", ("__version__",))
        trv = consts.get("__version__") if consts else None
    return {"torch": tv.get("__version__"), "cuda": tv.get("cuda"), "triton": trv}


def _module_constants(name: str, wanted: tuple[str, ...]) -> dict[str, Any] | None:
    """Top-level constant assignments of an installed module's source, without importing it (nor
    its package: `find_spec` of a submodule would import the parent); None when the source cannot be
    read or holds none of `wanted`."""
    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), *rest.split(".")) + ".py" if rest else spec.origin
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    found: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in wanted and isinstance(value, ast.Constant):
            found[target.id] = value.value
    return found or None


def env_record(device: str, gpu_index: int = 0) -> EnvRecord:
    """A snapshot before a measurement; NVML fields None where NVML or a GPU is absent."""
    rec = EnvRecord(**_versions(device))
    nv = _nvml() if device != "cpu" else None
    if nv is None:
        return rec
    try:
        h = _handle(nv, gpu_index)
        rec.gpu_index = nvml_index(gpu_index)
        rec.gpu_name = _s(nv.nvmlDeviceGetName(h))
        rec.driver = _s(nv.nvmlSystemGetDriverVersion())
        rec.sm_clock_mhz_before, rec.temp_c_before = _clock_temp(nv, h)
        rec.throttle_reasons = _reasons(nv, h)
    except Exception:  # noqa: BLE001 - a partial record beats none
        pass
    return rec


def gpu_processes(gpu_index: int = 0) -> int | None:
    """How many processes other than this one hold a compute context on this GPU now (NVML's list;
    None without NVML, or when NVML lists none: inside some containers it sees no processes). kiln's
    own process is left out: it launches nothing while it times, though the program that called it
    (a notebook, a training loop asking for rewards) may hold a context. The H200 run of the GPU test
    counted the test process itself, which had run CUDA tests before."""
    nv = _nvml()
    if nv is None:
        return None
    try:
        procs = nv.nvmlDeviceGetComputeRunningProcesses(_handle(nv, gpu_index))
    except Exception:  # noqa: BLE001 - unsupported on some boards and drivers
        return None
    pids = {int(p.pid) for p in procs}
    return len(pids - {os.getpid()}) if pids else None


def others(samples: list[tuple[int, int]]) -> int | None:
    """From (processes on the GPU, this check's live workers) samples: the most processes seen beyond
    the check's own (a worker of its own that holds no context only lowers the figure); None if none."""
    return max(max(0, n - own) for n, own in samples) if samples else None


def throttle_reasons(nvml_gpu_index: int) -> list[str]:
    """Current clock-event reasons of an NVML device (empty without NVML)."""
    nv = _nvml()
    if nv is None:
        return []
    try:
        return _reasons(nv, nv.nvmlDeviceGetHandleByIndex(nvml_gpu_index))
    except Exception:  # noqa: BLE001
        return []


def env_after(before: EnvRecord, seen: set[str] | None = None) -> EnvRecord:
    """Fill the after-fields and the throttling flag (reasons seen before, during and after)."""
    rec = before.model_copy(deep=True)
    reasons = set(before.throttle_reasons) | set(seen or ())
    nv = _nvml() if before.gpu_index is not None else None
    if nv is not None:
        try:
            h = nv.nvmlDeviceGetHandleByIndex(before.gpu_index)
            rec.sm_clock_mhz_after, rec.temp_c_after = _clock_temp(nv, h)
            reasons |= set(_reasons(nv, h))
        except Exception:  # noqa: BLE001
            pass
    rec.throttle_reasons = sorted(reasons)
    rec.throttled = bool(reasons & THROTTLING)
    return rec
