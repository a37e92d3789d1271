"""A lean launcher for a bundle's Triton kernels (GPU, Triton >= 3.3): `kernel[grid](*args)` costs
Triton's full launch path on every call (binding the arguments, specialising each one, building the
cache key, the hooks); inside a model the same call site launches with the same argument kinds every
forward. So the first call of a kind goes through Triton and its compiled kernel is kept; later calls
of that kind call the compiled kernel's launcher directly.

A *kind* is finer than Triton's own specialisation key, so a cached kernel is always the one Triton
would pick: the grid, the current device, every tensor's dtype and 16-byte alignment, and every other
argument's exact value (so constexprs, `num_warps` and sizes all take part). Anything else (a callable
grid, launch hooks set, pre-run hooks, an argument that cannot be hashed) takes Triton's own path.

Only bundles use this, after their kernels passed their checks (which launch through Triton's path,
so the check's timing never includes this shortcut). `lean(module)` swaps the module's `@triton.jit`
globals for `LeanKernel`s; under the interpreter (CPU) nothing changes.
"""

from __future__ import annotations

import os
from typing import Any

import torch

OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                     "launch_pdl", "debug"})


def available() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return False
    try:
        import triton
        from triton import knobs  # noqa: F401 - Triton >= 3.3 passes every bound argument to the launcher
    except ImportError:
        return False
    return tuple(int(x) for x in triton.__version__.split(".")[:2]) >= (3, 3)


def _hooked(hook: Any) -> bool:
    """Whether a Triton launch hook is set: None in older Triton, an empty `HookChain` (never None) in
    newer ones (3.6 on the H200: every lean call took Triton's path, 2026-12-03)."""
    return hook is not None and bool(getattr(hook, "calls", True))


_Tensor = torch.Tensor


def kind(grid: Any, device: int, args: tuple, kwargs: dict) -> tuple:
    """A call's kind as one flat tuple: the grid, the device, how many positional arguments, then each
    argument as two entries (a tensor's dtype and whether it is 16-byte aligned; any other value's
    type and the value itself), each keyword's name before its two, in the call's order (so two
    orders are two kinds, never one). A dtype is never a type, so no tensor reads as a value. Raises
    TypeError when an argument cannot be hashed (the caller then takes Triton's path)."""
    key = [grid, device, len(args)]
    for a in args:
        key += (a.dtype, not a.data_ptr() % 16) if isinstance(a, _Tensor) else (type(a), a)
    for k, v in kwargs.items():
        key += (k, v.dtype, not v.data_ptr() % 16) if isinstance(v, _Tensor) else (k, type(v), v)
    out = tuple(key)
    hash(out)
    return out


class _Plan:
    """How one kind of call becomes the launcher's arguments: every bound parameter in order, the
    tensors filled in per call, everything else fixed (it is part of the kind)."""

    def __init__(self, kernel: Any, jit: Any, grid: tuple, args: tuple, kwargs: dict) -> None:
        g = tuple(grid) + (1, 1)
        self.grid = (g[0], g[1], g[2])
        self.kernel = kernel
        params = {k: v for k, v in kwargs.items() if k not in OPTIONS}
        bound = jit.signature.bind(*args, **params)
        bound.apply_defaults()
        self.values = list(bound.arguments.values())
        pos = {name: i for i, name in enumerate(list(jit.signature.parameters)[:len(args)])}
        self.fill: list[tuple[int, int | str]] = []  # (slot, where the call holds it: position or keyword)
        for i, n in enumerate(bound.arguments):
            if isinstance(self.values[i], torch.Tensor):
                self.fill.append((i, pos.get(n, n)))
                self.values[i] = None

    def launch(self, args: tuple, kwargs: dict, stream: int, exit_hook: Any) -> None:
        vals = list(self.values)
        for i, src in self.fill:
            vals[i] = args[src] if isinstance(src, int) else kwargs[src]
        k = self.kernel
        k.run(*self.grid, stream, k.function, k.packed_metadata, None, None, exit_hook, *vals)


class LeanKernel:
    """Stands in for one `@triton.jit` function: `k[grid](*args, **kwargs)` as before."""

    def __init__(self, jit: Any) -> None:
        self.jit = jit
        self.plans: dict[tuple, _Plan] = {}
        self.lean_calls = 0
        self.broken: str | None = None  # why the lean path was given up (then Triton's path only)

    def __getattr__(self, name: str) -> Any:
        if name == "jit":
            raise AttributeError(name)
        return getattr(self.jit, name)

    def __getitem__(self, grid: Any) -> Any:
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid: Any, args: tuple, kwargs: dict) -> Any:
        rt = _knobs().runtime
        if self.broken or callable(grid) or _hooked(rt.launch_enter_hook) or self.jit.pre_run_hooks:
            return self.jit[grid](*args, **kwargs)
        device = _device()
        try:
            key = kind(grid if type(grid) is tuple else tuple(grid), device, args, kwargs)
        except TypeError:
            return self.jit[grid](*args, **kwargs)
        plan = self.plans.get(key)
        if plan is None:
            kernel = self.jit[grid](*args, **kwargs)
            if kernel is not None and len(self.plans) < 64:
                try:
                    self.plans[key] = _Plan(kernel, self.jit, tuple(grid), args, kwargs)
                except Exception as err:  # noqa: BLE001 - a Triton whose internals differ: its own path only
                    self.broken = f"{type(err).__name__}: {err}"
            return kernel
        try:
            exit_hook = rt.launch_exit_hook
            plan.launch(args, kwargs, _stream(device), exit_hook if _hooked(exit_hook) else None)
        except Exception as err:  # noqa: BLE001 - the launcher refused before launching: Triton's path
            self.broken = f"{type(err).__name__}: {err}"
            return self.jit[grid](*args, **kwargs)
        self.lean_calls += 1
        return plan.kernel


def _knobs() -> Any:
    """`triton.knobs`, imported once (an import statement per launch costs more than the lookup)."""
    global _KNOBS
    if _KNOBS is None:
        from triton import knobs

        _KNOBS = knobs
    return _KNOBS


_KNOBS: Any = None


def _device() -> int:
    """The current CUDA device: `torch.cuda.current_device()` without its Python wrapper (the C call
    initialises CUDA lazily itself)."""
    return torch._C._cuda_getDevice()


def _stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)


def lean(module: Any) -> int:
    """Swap a kernel module's `@triton.jit` globals for LeanKernels (when available); how many."""
    if not available():
        return 0
    from triton.runtime.jit import JITFunction

    n = 0
    for name, v in list(vars(module).items()):
        if isinstance(v, JITFunction):
            setattr(module, name, LeanKernel(v))
            n += 1
    return n
