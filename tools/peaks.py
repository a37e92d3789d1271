"""One GPU's measured ceilings, one record and one cache for every user: the physics floor of a
check (`kiln.tools.integrity.physics`), the profiler's roofline (`kiln.tools.profile`) and the
Judge's GPU facts.

Measured once per GPU (`python -m kiln.tools.peaks`, a process running kiln's code only) and cached
in `$KILN_CACHE_DIR/peaks.json`, keyed by the GPU's name and UUID and torch's version. Only kiln's
own process reads or writes the cache; a check's workers never see it. Bandwidth is a 1 GiB
device-to-device copy (bytes read + written); compute is an 8192^3 matmul per dtype (fp32 without
TF32, tf32, bf16, fp16); launch overhead is the GPU time per tiny op launched back to back.
Datasheet numbers are leads only, used (and labelled) until a measurement exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from kiln.tools.files import write_atomic
from kiln.tools.records import Record

COPY_BYTES = 1 << 30
MATMUL_N = 8192


class Peaks(Record):
    """Ceilings of one GPU; `source` says how they were obtained."""

    gpu_name: str = ""
    source: str = Field("none", description="measured | cache:<file> | recorded | datasheet | none")
    copy_gbps: float | None = Field(None, description="device-to-device copy, bytes read + written, GB/s")
    matmul_tflops: dict[str, float] = Field(default_factory=dict, description="fp32 (no TF32), tf32, bf16, fp16")
    launch_overhead_us: float | None = Field(
        None, description="GPU time per tiny torch op launched back to back from Python (host launch cost)")
    sm_count: int | None = None
    measured_at: str | None = None

    def ridge_flop_per_byte(self, dtype: str) -> float | None:
        """Arithmetic intensity where the memory roof meets the compute roof."""
        tflops = self.matmul_tflops.get(dtype)
        if not tflops or not self.copy_gbps:
            return None
        return tflops * 1e12 / (self.copy_gbps * 1e9)

    def floor_tflops(self, dtype: str) -> float | None:
        """The fastest rate a candidate may legitimately use for a `dtype` problem: that dtype's tensor
        cores (TF32 for fp32) or bf16's (a lower-precision kernel is a `static.downcast` finding and a
        tolerance question, not a physics violation). The physics floor must never reject an honest
        kernel, so it takes the fastest."""
        usable = {"fp32": ("fp32", "tf32", "bf16"), "bf16": ("bf16",), "fp16": ("fp16", "bf16")}.get(dtype, (dtype,))
        rates = [self.matmul_tflops[d] for d in usable if self.matmul_tflops.get(d)]
        return max(rates) if rates else None


# Measured by `measure()` on kiln's H200 machine on 2026-11-29 (tests/fixtures/ncu/h200_peaks.json);
# used for an H200 until this machine's own measurement is cached.
RECORDED = {
    "nvidia-h200": Peaks(gpu_name="NVIDIA H200", source="recorded", copy_gbps=4130.9,
                         matmul_tflops={"fp32": 50.5, "tf32": 400.1, "bf16": 759.8, "fp16": 731.0},
                         launch_overhead_us=10.46, sm_count=132, measured_at="2026-11-29"),
}
DATASHEET = {  # vendor numbers (dense), leads only
    "nvidia-h100-80gb-hbm3": Peaks(gpu_name="NVIDIA H100 80GB HBM3", source="datasheet", copy_gbps=3350.0,
                                   matmul_tflops={"fp32": 67.0, "tf32": 495.0, "bf16": 989.0, "fp16": 989.0},
                                   sm_count=132),
}


def gpu_slug(name: str) -> str:
    """A GPU's name as a key and a file-name part: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def known(gpu_name: str | None) -> Peaks:
    """Recorded on this project's machine > datasheet > none (never a measurement of this GPU)."""
    slug = gpu_slug(gpu_name or "")
    for table in (RECORDED, DATASHEET):
        if slug in table:
            return table[slug]
    return Peaks(gpu_name=gpu_name or "", source="none")


# ----------------------------------------------------------------------------- the cache (kiln's process only)


def cache_file() -> Path:
    from kiln.tools.compile import default_cache_root

    return default_cache_root() / "peaks.json"


def identity(gpu_index: int) -> str | None:
    """'name|uuid|torch version' of a GPU, from NVML: no CUDA context (nor torch) in the caller's process."""
    from kiln.tools import gpuenv

    nv = gpuenv._nvml()
    if nv is None:
        return None
    try:
        h = nv.nvmlDeviceGetHandleByIndex(gpuenv.nvml_index(gpu_index))
        return f"{gpuenv._s(nv.nvmlDeviceGetName(h))}|{gpuenv._s(nv.nvmlDeviceGetUUID(h))}|torch{gpuenv.library_versions()['torch']}"
    except Exception:  # noqa: BLE001 - no identity, no cache
        return None


def cached(gpu_index: int) -> Peaks | None:
    key = identity(gpu_index)
    try:
        entry = json.loads(cache_file().read_text()).get(key) if key else None
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(entry, dict):
        return None
    try:
        return Peaks.model_validate(entry).model_copy(update={"source": f"cache:{cache_file()}"})
    except ValueError:
        return None


def store(gpu_index: int, peaks: Peaks) -> None:
    key = identity(gpu_index)
    if key is None:
        return
    path = cache_file()
    try:
        data = json.loads(path.read_text())
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[key] = peaks.model_dump()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True))
    except OSError:
        pass  # an unwritable cache only costs a measurement next time


def get(gpu_index: int, *, measure: bool = True, env: dict[str, str] | None = None, timeout_s: float = 180.0
        ) -> Peaks | None:
    """This GPU's peaks: cached, else (with `measure`) measured now in a fresh process running kiln's
    own code with `env` (pinned to the GPU), then cached. None when nothing could be had."""
    hit = cached(gpu_index)
    if hit is not None or not measure:
        return hit
    proc = subprocess.run([sys.executable, "-m", "kiln.tools.peaks"], capture_output=True, text=True,
                          timeout=timeout_s, check=False, env=env)
    if proc.returncode != 0:
        return None
    try:
        peaks = Peaks.model_validate_json(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    store(gpu_index, peaks)
    return peaks


# ----------------------------------------------------------------------------- measuring (a kiln-only process)


def _time_ms(fn: Callable[[], object], reps: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return min(times)  # a ceiling: the best run


def measure() -> Peaks:
    """Measure this process's GPU 0 (the caller pins the GPU)."""
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src), 20)
    tflops = {}
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
        b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
        ms = _time_ms(functools.partial(torch.matmul, a, b), 10)
        tflops[name] = round(2 * MATMUL_N**3 / (ms * 1e-3) / 1e12, 1)
    torch.backends.cuda.matmul.allow_tf32 = False
    tiny = torch.zeros(1, device="cuda")
    launch_ms = _time_ms(lambda: [tiny.add_(1) for _ in range(1000)], 5) / 1000
    props = torch.cuda.get_device_properties(0)
    return Peaks(gpu_name=props.name, source="measured", copy_gbps=round(2 * COPY_BYTES / (copy_ms * 1e-3) / 1e9, 1),
                 matmul_tflops=tflops, launch_overhead_us=round(launch_ms * 1e3, 2),
                 sm_count=props.multi_processor_count, measured_at=dt.datetime.now(dt.UTC).isoformat())


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="kiln.tools.peaks", description="measure this GPU's peaks; JSON on stdout").parse_args(argv)
    print(measure().model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
