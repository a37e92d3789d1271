"""Timing inside one worker: the same procedure for the candidate (in its worker) and for each
baseline (in the baseline worker, which never imports the candidate). The parent turns the raw
samples of both into statistics and speedups, and checks each run against its own clock.

Baselines: `eager` (the reference with PyTorch's defaults, as KernelBench times it), `eager_tf32`
(TF32 allowed for matmul and cuDNN, KernelBench-Verified's fairer baseline), `compile`
(`torch.compile` default mode, its compile time excluded by the warm-up).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kiln.tools import gpuenv
from kiln.tools.timing.bench import (
    InputRotation,
    L2Flusher,
    Timed,
    TimedInputs,
    new_event,
    time_callable,
    warm_up,
)

METHOD = ("cuda-events per call; L2 flushed (2x L2 size) before each call; {n} input sets, every call's inputs "
          "refreshed in place with fresh noise; warm-up; >=30 samples then adaptive until the 95% bootstrap CI "
          "half-width of the median <= 1% or the time cap; baselines timed the same way in a separate process "
          "that never imported the candidate; every timed output sketched and a secret subset re-checked "
          "against the reference outside the candidate's process")
POOL_BUDGET_BYTES = 12 << 30
"""GPU memory the pool of timing input sets may take (each set once; two working slots and a noise
buffer come on top): KernelBench's multi-GB inputs get fewer sets, small problems the maximum."""
MAX_SETS = 4


def n_input_sets(input_bytes: int) -> int:
    """How many distinct input sets the timing pool holds (the parent decides, both sides follow)."""
    return max(1, min(MAX_SETS, POOL_BUDGET_BYTES // max(input_bytes, 1)))


@contextlib.contextmanager
def tf32(allowed: bool | None) -> Iterator[None]:
    """None: leave PyTorch's defaults; True/False: force TF32 for matmul and cuDNN, then restore."""
    import torch

    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if allowed is not None:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def os_threads() -> int:
    """Threads of this process as the OS sees them (native threads included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class Prepared:
    """What a timing run needs, made before the parent starts its clock on the timed loop. On the
    CPU (a test of the protocol only) there is no L2 to flush and no NVML."""

    def __init__(self, fn: Callable[..., Any], feed: TimedInputs, device: str) -> None:
        import torch

        self.fn, self.feed = fn, feed
        cuda = device == "cuda"
        index = torch.cuda.current_device() if cuda else 0
        self.env = gpuenv.env_record(device, index)
        self.throttle = _ThrottleSampler(self.env.gpu_index if cuda else None)
        self.flush: Callable[[], None] | None = L2Flusher(index) if cuda else None
        self.rot = InputRotation(feed)
        with torch.no_grad():
            warm_up(fn, self.rot)  # JIT, autotuning, caches: here, before the parent's clock starts


def run_loop(p: Prepared, *, max_time_s: float, sketch_key: int | None) -> tuple[Timed, dict[str, Any]]:
    """The timed loop (what the parent's clock brackets), then the facts around it."""
    import torch

    threads = os_threads()
    with torch.no_grad():
        run = time_callable(p.fn, p.feed, max_time_s=max_time_s, flush=p.flush, sketch_key=sketch_key,
                            on_batch=p.throttle, warmed=p.rot)
    facts = {"threads_before": threads, "threads_after": os_threads(), "n_calls": len(run.samples),
             "first_call": run.first_call, "env": gpuenv.env_after(p.env, p.throttle.reasons).model_dump()}
    return run, facts


def baseline_fn(name: str, reference: Any) -> Callable[..., Any]:
    import torch

    if name in ("eager", "eager_tf32"):
        return reference
    if name == "compile":
        return torch.compile(reference)
    raise ValueError(f"unknown baseline {name!r}: use eager, eager_tf32 or compile")


def settle_compiled(fn: Callable[..., Any], inputs: tuple) -> None:
    """Compile (first call, on copies of the inputs), then stop inductor's compile-worker processes
    before anything is timed. A cold compile starts a pool of Python processes that go on importing
    torch for seconds; timed beside them, the host falls behind the GPU and the compiled baseline
    looks slower than it is (seen once on the H200: 1.53x instead of 1.21x over torch.compile for
    the same kernel, only in the check that compiled it cold) — a flattering number for the candidate.
    kiln's workers run with TORCHINDUCTOR_COMPILE_THREADS=1, so no pool starts there; stopping one
    here is the backstop for an inductor that starts it anyway."""
    import torch

    fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in inputs])
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:
        return
    shutdown_compile_workers()


class _ThrottleSampler:
    """Samples NVML throttle reasons after each batch; remembers every reason seen."""

    def __init__(self, nvml_index: int | None) -> None:
        self.index, self.reasons = nvml_index, set()  # type: ignore[var-annotated]

    def __call__(self) -> None:
        if self.index is not None:
            self.reasons.update(gpuenv.throttle_reasons(self.index))


def wall_over_event(fn: Callable[..., Any], inputs: tuple, n: int = 20) -> dict[str, float | None]:
    """Host wall time around a device-wide sync vs event time on the current stream, same calls.

    Work on a side stream escapes the events but not the device-wide sync, so the ratio rises well
    above 1. The ratio compares medians per call, after subtracting the fixed cost of an empty
    sync+events region from the wall time; also the raw totals (wall_us, event_us, n_calls)."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_initialized() else (lambda: None)

    def one(call: bool) -> tuple[float, float]:
        s, e = new_event(), new_event()
        sync()
        t0 = time.perf_counter()
        s.record()
        if call:
            fn(*inputs)
        e.record()
        sync()
        return (time.perf_counter() - t0) * 1e6, s.elapsed_time(e) * 1e3

    with torch.no_grad():
        for _ in range(3):
            one(True)
        empty = sorted(one(False)[0] for _ in range(n))[n // 2]
        runs = [one(True) for _ in range(n)]
    wall = sorted(w for w, _ in runs)[n // 2]
    event = sorted(e for _, e in runs)[n // 2]
    return {"wall_over_event": max(wall - empty, 0.0) / event if event > 0 else None,
            "wall_us": sum(w for w, _ in runs), "event_us": sum(e for _, e in runs), "n_calls": n}


def peak_bytes(module: Any, inputs: tuple) -> int:
    """Peak GPU memory of one call: bytes held by the module's tensors + the call's own peak
    (outputs and workspace above what was allocated before the call)."""
    import torch

    if not torch.cuda.is_initialized():
        return 0  # CPU (a test of the protocol): no allocator statistics to read
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with torch.no_grad():
        out = module(*inputs)
    torch.cuda.synchronize()
    transient = torch.cuda.max_memory_allocated() - before
    del out
    return int(transient + module_tensor_bytes(module))


def module_tensor_bytes(module: Any) -> int:
    """Bytes of CUDA tensors a module holds: parameters, buffers and plain tensor attributes."""
    import torch

    seen: dict[int, int] = {}
    mods = module.modules() if isinstance(module, torch.nn.Module) else [module]
    for m in mods:
        for t in list(vars(m).values()) + list(m.parameters(recurse=False)) + list(m.buffers(recurse=False)):
            if isinstance(t, torch.Tensor) and t.is_cuda:
                st = t.untyped_storage()
                seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())
