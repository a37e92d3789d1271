"""The one device resolver: `--device auto | cuda | cpu` to the device a command runs on.

Every command calls `resolve_device` once, at its CLI, and passes the result down (`LoopOptions.device`,
`CheckOptions.device`, ...); nothing below resolves again. The Python API resolves where it starts
(`run_problem` without a `loop`, `check` given "auto"). It asks NVML (milliseconds) before falling
back to importing torch (seconds), so a CLI can start its workers without waiting for torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from kiln.tools.errors import KilnConfigError

DEVICES = ("auto", "cuda", "cpu")


def check_device_name(device: str) -> str:
    """The --device value checked without looking for a GPU."""
    if device not in DEVICES:
        raise KilnConfigError(f"--device must be one of auto, cuda, cpu (got {device!r})")
    return device


def gpu_count() -> int:
    """CUDA GPUs visible to this process: NVML first, torch when NVML cannot answer."""
    if not Path("/dev/nvidiactl").exists():
        return 0
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: ask torch
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(device: str) -> Literal["cuda", "cpu"]:
    """auto: cuda when a GPU is visible, else cpu; cuda without one is refused in one line."""
    if check_device_name(device) == "cpu":
        return "cpu"
    found = gpu_count() > 0
    if device == "cuda" and not found:
        raise KilnConfigError("--device cuda: no CUDA GPU is visible here (use --device cpu)")
    return "cuda" if found else "cpu"
