"""The timing stage of a check: the candidate and its baselines, timed the same way in one process.

Baselines: `eager` (the reference with PyTorch's defaults, as KernelBench times it), `eager_tf32`
(TF32 allowed for matmul and cuDNN, KernelBench-Verified's fairer baseline), `compile`
(`torch.compile` default mode, its compile time excluded by the warm-up). Only correct candidates
are timed (the caller's job).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kiln.tools import gpuenv
from kiln.tools.records import MemoryRecord, TimingIntegrity, TimingRecord, TimingStat
from kiln.tools.timing.bench import L2Flusher, time_callable
from kiln.tools.timing.stats import speedup

N_INPUT_SETS = 4
METHOD = ("cuda-events per call; L2 flushed (2x L2 size) before each call; {n} rotating input sets "
          "refreshed in place between calls; warm-up; >=30 samples then adaptive until the 95% bootstrap "
          "CI half-width of the median <= 1% or the time cap; baselines in the same process, same inputs")


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


def input_sets(make_inputs: Callable[[int], tuple], n_max: int = N_INPUT_SETS) -> list[tuple]:
    """Up to n_max input sets, fewer when they would take more than a quarter of free GPU memory
    (each set is held once in the pool; InputRotation adds two working slots)."""
    import torch

    first = make_inputs(0)
    nbytes = sum(t.untyped_storage().nbytes() for t in first if isinstance(t, torch.Tensor))
    free, _ = torch.cuda.mem_get_info()
    n = max(1, min(n_max, int(free * 0.25 // max(nbytes, 1)) - 2))
    return [first] + [make_inputs(i) for i in range(1, n)]


def run_timing_stage(candidate: Any, reference: Any, make_inputs: Callable[[int], tuple], *,
                     baselines: list[str], recheck: Callable[[tuple, Any], bool] | None,
                     max_time_s: float, threshold: float = 1.0,
                     step: Callable[[str], None] | None = None) -> tuple[TimingRecord, TimingIntegrity]:
    """Time the candidate and each baseline; speedups with CIs; memory; env; timing integrity.
    `step(what)` is told as each part starts (the worker's heartbeat and trace)."""
    import torch

    step = step or (lambda _what: None)
    step("environment")
    env = gpuenv.env_record("cuda", torch.cuda.current_device())
    throttle = _ThrottleSampler(env.gpu_index)
    step("input sets")
    sets = input_sets(make_inputs)
    flush = L2Flusher(torch.cuda.current_device())
    share = max_time_s / (1 + len(baselines))
    integ = TimingIntegrity(threads_before=os_threads(), distinct_inputs=True)
    step("candidate")
    cand_stat, cand_us = _time_candidate(candidate, sets, flush, share, recheck, integ, throttle)
    integ.threads_after = os_threads()
    step("wall vs event time")
    integ.wall_over_event = wall_over_event(candidate, sets[0], integ)
    rec = TimingRecord(measured=True, method=METHOD.format(n=N_INPUT_SETS), candidate=cand_stat)
    for name in baselines:
        step(f"baseline {name}")
        try:
            fn = _baseline_fn(name, reference)
            with tf32(True if name == "eager_tf32" else None), torch.no_grad():
                if name == "compile":
                    settle_compiled(fn, sets[0])
                stat, us = time_callable(fn, sets, max_time_s=share, flush=flush, on_batch=throttle)
        except Exception as exc:  # noqa: BLE001 - a baseline that fails (e.g. compile) is reported, not fatal
            rec.baseline_errors[name] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            continue
        rec.baselines[name] = stat
        rec.speedups[name] = speedup(us, cand_us, name=name, threshold=threshold)
    step("peak memory")
    rec.memory = peak_memory(candidate, reference, sets[0])
    rec.env = gpuenv.env_after(env, throttle.reasons)
    return rec, integ


def _time_candidate(candidate: Any, sets: list[tuple], flush: L2Flusher, max_s: float,
                    recheck: Callable[[tuple, Any], bool] | None, integ: TimingIntegrity,
                    throttle: _ThrottleSampler) -> tuple[TimingStat, list[float]]:
    import torch

    def on_output(_i: int, inputs: tuple, out: Any) -> None:
        integ.timed_outputs_checked += 1
        if recheck is not None and not recheck(inputs, out):
            integ.timed_outputs_failed += 1

    with torch.no_grad():
        return time_callable(candidate, sets, max_time_s=max_s, flush=flush,
                             on_output=on_output if recheck is not None else None, on_batch=throttle)


def _baseline_fn(name: str, reference: Any) -> Callable[..., Any]:
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


def wall_over_event(fn: Callable[..., Any], inputs: tuple, integ: TimingIntegrity | None = None,
                    n: int = 20) -> float | None:
    """Host wall time around a device-wide sync vs event time on the current stream, same calls.

    Work on a side stream escapes the events but not the device-wide sync, so the ratio rises well
    above 1. The ratio compares medians per call, after subtracting the fixed cost of an empty
    sync+events region from the wall time; `integ` also gets the raw totals (wall_us, event_us,
    n_calls) of the same calls.
    """
    import torch

    def one(call: bool) -> tuple[float, float]:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        if call:
            fn(*inputs)
        e.record()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e6, s.elapsed_time(e) * 1e3

    with torch.no_grad():
        for _ in range(3):
            one(True)
        empty = sorted(one(False)[0] for _ in range(n))[n // 2]
        runs = [one(True) for _ in range(n)]
    if integ is not None:
        integ.wall_us, integ.event_us, integ.n_calls = sum(w for w, _ in runs), sum(e for _, e in runs), n
    wall = sorted(w for w, _ in runs)[n // 2]
    event = sorted(e for _, e in runs)[n // 2]
    return max(wall - empty, 0.0) / event if event > 0 else None


def peak_memory(candidate: Any, reference: Any, inputs: tuple) -> MemoryRecord:
    """Peak GPU memory of one call: bytes held by the module's tensors + the call's own peak
    (outputs and workspace above what was allocated before the call)."""
    c, r = _peak(candidate, inputs), _peak(reference, inputs)
    return MemoryRecord(candidate_peak_bytes=c, reference_peak_bytes=r, ratio=c / r if r else None)


def _peak(module: Any, inputs: tuple) -> int:
    import torch

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
