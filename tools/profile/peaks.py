"""Measured peaks of one GPU: device copy bandwidth, matmul rate per dtype, launch overhead.

Measured once per GPU (in a subprocess: `python -m kiln.tools.profile.peaks --out FILE`) and cached
as JSON keyed by the GPU's name. Datasheet numbers are leads only; a report says which it used.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kiln.tools.profile.metrics import gpu_slug
from kiln.tools.profile.records import Peaks

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


def cached_peaks(cache_dir: Path, gpu_name: str | None) -> Peaks:
    """Measured (cache) > recorded on this project's machine > datasheet > none."""
    slug = gpu_slug(gpu_name or "")
    path = cache_dir / f"peaks-{slug}.json"
    if path.is_file():
        try:
            return Peaks.model_validate_json(path.read_text())
        except ValueError:
            pass
    for table in (RECORDED, DATASHEET):
        if slug in table:
            return table[slug]
    return Peaks(gpu_name=gpu_name or "", source="none")


def measure_in_subprocess(cache_dir: Path, gpu_name: str, timeout_s: float = 120.0) -> Peaks:
    """Measure in a fresh process (never in the caller's CUDA context) and cache the result."""
    path = cache_dir / f"peaks-{gpu_slug(gpu_name)}.json"
    cache_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "kiln.tools.profile.peaks", "--out", str(path)],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0 or not path.is_file():
        return cached_peaks(cache_dir, gpu_name)
    return Peaks.model_validate_json(path.read_text())


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
    return statistics.median(times)


def measure() -> Peaks:
    import torch

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src), 20)
    tflops = {}
    for name, dtype, n, tf32 in (("fp32", torch.float32, 8192, False), ("tf32", torch.float32, 8192, True),
                                 ("bf16", torch.bfloat16, 8192, False), ("fp16", torch.float16, 8192, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = _time_ms(functools.partial(torch.matmul, a, b), 10)
        tflops[name] = round(2 * n**3 / (ms * 1e-3) / 1e12, 1)
    torch.backends.cuda.matmul.allow_tf32 = False
    tiny = torch.zeros(1, device="cuda")
    launch_ms = _time_ms(lambda: [tiny.add_(1) for _ in range(1000)], 5) / 1000
    props = torch.cuda.get_device_properties(0)
    return Peaks(gpu_name=props.name, source="measured", copy_gbps=round(2 * src.numel() / (copy_ms * 1e-3) / 1e9, 1),
                 matmul_tflops=tflops, launch_overhead_us=round(launch_ms * 1e3, 2),
                 sm_count=props.multi_processor_count, measured_at=dt.datetime.now(dt.UTC).isoformat())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kiln.tools.profile.peaks")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    peaks = measure()
    a.out.write_text(json.dumps(peaks.model_dump(), indent=1))
    print(peaks.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
