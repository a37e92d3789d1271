"""What the timing stage needs inside a worker beyond the lap harness (`kiln.tools.timing.laps`): the
baselines as callables, TF32 switched on or off around them, and a call's peak memory.

Baselines: `eager` (the reference with PyTorch's defaults, as KernelBench times it), `eager_tf32`
(TF32 allowed for matmul and cuDNN, KernelBench-Verified's fairer baseline), `compile`
(`torch.compile` default mode, its compile time excluded by the warm-up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


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


def profiled_once(model: Any, inputs: tuple, device: str) -> None:
    """One forward under torch.profiler (CPU operators and CUDA kernels), as the candidate's worker
    runs in its integrity stage before it is timed: the profiler leaves CUPTI attached to a process
    (Kineto does not finalize it by default), which may slow every later launch, and the two workers'
    refresh, lap and commit steps must cost the same when nothing is hidden in them."""
    if device != "cuda":
        return
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            model(*inputs)
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - a profiler that cannot run leaves the worker as it was
        torch.cuda.synchronize()
