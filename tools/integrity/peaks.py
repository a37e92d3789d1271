"""Measured hardware peaks: memory bandwidth and matmul throughput, once per GPU, cached on disk.

Bandwidth comes from a large device-to-device copy (bytes read + bytes written over the best time),
compute from a large square matmul. The physics floor must never reject an honest kernel, so the
compute peak is the *fastest* of the problem's dtype (TF32 allowed for fp32) and bf16: a candidate
may legitimately use lower-precision tensor cores (that is a `static.downcast` finding, not a
physics violation). Measurement takes a few seconds; the cache key is the GPU name + UUID, torch
version and dtype.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from kiln.tools.records import Record

COPY_BYTES = 1 << 30  # 1 GiB source + 1 GiB destination: far beyond any L2
MATMUL_N = 8192
REPS = 10


class Peaks(Record):
    device: str = "cpu"
    gpu_name: str | None = None
    dtype: str = "fp32"
    gbps: float | None = Field(None, description="measured copy bandwidth, GB/s (1e9 bytes/s)")
    tflops: float | None = Field(None, description="fastest measured matmul rate usable by this dtype")
    tflops_by_dtype: dict[str, float] = Field(default_factory=dict)
    source: str = Field("none", description="measured | cache:<file> | none (no GPU)")


def default_cache_file() -> Path:
    return Path.home() / ".cache" / "kiln" / "peaks.json"


def get_peaks(device: str, dtype: str, *, cache_file: Path | None = None, gpu_index: int = 0) -> Peaks:
    """Peaks of this GPU for `dtype`, from the cache or measured now (and cached). CPU: empty Peaks."""
    if device != "cuda":
        return Peaks(device=device, dtype=dtype)
    import torch

    if not torch.cuda.is_available():
        return Peaks(device=device, dtype=dtype)
    path = cache_file or default_cache_file()
    key = _cache_key(gpu_index, dtype)
    cache = _read_cache(path)
    if key in cache:
        return Peaks.model_validate(cache[key]).model_copy(update={"source": f"cache:{path}"})
    peaks = measure_peaks(dtype, gpu_index=gpu_index)
    cache[key] = peaks.model_dump()
    _write_cache(path, cache)
    return peaks


def cached_peaks(dtype: str, *, cache_file: Path | None = None, gpu_index: int = 0) -> Peaks | None:
    """This GPU's peaks for `dtype` if the cache has them (no measurement: for a process that
    shares the GPU with others, where a measurement would come out low)."""
    path = cache_file or default_cache_file()
    entry = _read_cache(path).get(_cache_key(gpu_index, dtype))
    return Peaks.model_validate(entry).model_copy(update={"source": f"cache:{path}"}) if entry else None


def measure_peaks(dtype: str, *, gpu_index: int = 0) -> Peaks:
    import torch

    dev = torch.device("cuda", gpu_index)
    gbps = measure_copy_gbps(dev)
    rates = {d: measure_matmul_tflops(dev, d) for d in sorted({dtype, "bf16"})}
    return Peaks(device="cuda", gpu_name=torch.cuda.get_device_name(dev), dtype=dtype, gbps=gbps,
                 tflops=max(rates.values()), tflops_by_dtype=rates, source="measured")


def measure_copy_gbps(dev: Any) -> float:
    import torch

    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=dev).uniform_()
    dst = torch.empty_like(src)
    best_ms = _best_ms(lambda: dst.copy_(src))
    return 2 * COPY_BYTES / (best_ms * 1e-3) / 1e9


def measure_matmul_tflops(dev: Any, dtype: str) -> float:
    import torch

    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    a = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=tdt)
    b = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=tdt)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # fp32 candidates may use TF32 tensor cores
    try:
        best_ms = _best_ms(lambda: a @ b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return 2 * MATMUL_N**3 / (best_ms * 1e-3) / 1e12


def _best_ms(fn: object) -> float:
    import torch

    for _ in range(3):
        fn()  # type: ignore[operator]
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()  # type: ignore[operator]
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return min(times)


def _cache_key(gpu_index: int, dtype: str) -> str:
    import torch

    props = torch.cuda.get_device_properties(gpu_index)
    uuid = str(getattr(props, "uuid", ""))
    return f"{props.name}|{uuid}|torch{torch.__version__}|{dtype}"


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, cache: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs a re-measurement next time
