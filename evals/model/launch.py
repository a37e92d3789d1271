"""A lean launcher for a bundle's Triton kernels (GPU, Triton >= 3.3): `kernel[grid](*args)` costs
Triton's full launch path on every call (binding the arguments, specialising each one, building the
cache key, the hooks); inside a model the same call site launches with the same argument kinds every
forward. So the first call of a kind goes through Triton and its compiled kernel is kept; later calls
of that kind call the compiled kernel's launcher directly.

A *kind* is finer than Triton's own specialisation key, so a cached kernel is always the one Triton
would pick: the grid, the current device, every tensor's dtype and 16-byte alignment, and every other
argument's exact value (so constexprs, `num_warps` and sizes all take part). Anything else (a callable
grid, launch hooks set, pre-run hooks, an argument that cannot be hashed) takes Triton's own path.
`kind` walks the arguments in a loop; a call laid out like one seen before (the same argument count,
tensor positions and keywords) is found first by that layout's *quick key*, the same facts read by
one compiled function (`quick_key`: a third fewer instructions a launch), and the launcher's arguments
are built by one compiled expression too.

Only bundles use this, after their kernels passed their checks (which launch through Triton's path,
so the check's timing never includes this shortcut). `lean(module)` swaps the module's `@triton.jit`
globals for `LeanKernel`s; under the interpreter (CPU) nothing changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from kiln.evals.model.guard import compiled

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
    tensors taken from the call, everything else fixed (it is part of the kind); `args(a, k, v)` builds
    them in one expression."""

    def __init__(self, kernel: Any, jit: Any, grid: tuple, args: tuple, kwargs: dict) -> None:
        g = tuple(grid) + (1, 1)
        self.grid = (g[0], g[1], g[2])
        self.kernel = kernel
        params = {k: v for k, v in kwargs.items() if k not in OPTIONS}
        bound = jit.signature.bind(*args, **params)
        bound.apply_defaults()
        self.values = tuple(bound.arguments.values())
        pos = {name: i for i, name in enumerate(list(jit.signature.parameters)[:len(args)])}
        slots = []  # where each launcher argument comes from: a tensor from the call, else the plan
        for i, n in enumerate(bound.arguments):
            if not isinstance(self.values[i], torch.Tensor):
                slots.append(f"v[{i}]")
            else:
                slots.append(f"a[{pos[n]}]" if n in pos else f"k[{n!r}]")
        self.args = compiled("launcher_args", "a, k, v", [f"return ({''.join(x + ', ' for x in slots)})"])

    def launch(self, args: tuple, kwargs: dict, stream: int, exit_hook: Any) -> None:
        k = self.kernel
        k.run(*self.grid, stream, k.function, k.packed_metadata, None, None, exit_hook,
              *self.args(args, kwargs, self.values))


def layout(args: tuple, kwargs: dict) -> tuple:
    """How a call is laid out: its argument count, which arguments are tensors, its keywords in order."""
    return len(args), tuple(isinstance(a, _Tensor) for a in args), tuple(kwargs)


def quick_key(args: tuple, kwargs: dict) -> Callable[[Any, int, tuple, dict], tuple | None]:
    """For calls laid out like this one, `(grid, device, args, kwargs) -> key` in one function: the
    grid, device and keyword names in order, then each tensor's dtype and each other argument's type
    and value; None when a tensor is not 16-byte aligned. Equal keys of one layout are the same kind
    (`kind`), so a plan found by it is the plan `kind` would find. It raises on a call of another
    length or missing a keyword, or with a value where a tensor was (no `data_ptr`); a tensor where a
    value was gives a key no plan has (its type differs)."""
    parts, ptrs = ["g", "d", "tuple(k)"], []
    for i, a in enumerate(args):
        parts += [f"a[{i}].dtype"] if isinstance(a, _Tensor) else [f"type(a[{i}])", f"a[{i}]"]
        ptrs += [f"a[{i}].data_ptr()"] if isinstance(a, _Tensor) else []
    for name in kwargs:
        parts += [f"type(k[{name!r}])", f"k[{name!r}]"]
    return compiled("quick_key", "g, d, a, k", [f"if len(a) != {len(args)}:", "    raise LookupError",
                                                 f"if ({' | '.join(ptrs) or '0'}) & 15:", "    return None",
                                                 f"return ({', '.join(parts)},)"])


class LeanKernel:
    """Stands in for one `@triton.jit` function: `k[grid](*args, **kwargs)` as before."""

    def __init__(self, jit: Any) -> None:
        self.jit = jit
        self.plans: dict[tuple, _Plan] = {}
        self.quick: dict[tuple, _Plan] = {}  # the same plans by quick key (`quick_key`)
        self.quick_keys: dict[tuple, Callable] = {}  # a quick key function per argument layout seen
        self.lean_calls = 0
        self.broken: str | None = None  # why the lean path was given up (then Triton's path only)

    def __getattr__(self, name: str) -> Any:
        if name == "jit":
            raise AttributeError(name)
        return getattr(self.jit, name)

    def __getitem__(self, grid: Any) -> Any:
        return partial(self.launch, grid)

    def launch(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        rt = (_KNOBS or _knobs()).runtime
        hook = rt.launch_enter_hook  # `_hooked`, inlined (so below): every launch
        if self.broken or (hook is not None and getattr(hook, "calls", True)) or self.jit.pre_run_hooks \
                or callable(grid):
            return self.jit[grid](*args, **kwargs)
        device = _device()
        plan = self._quick(grid, device, args, kwargs)
        if plan is None:
            try:
                key = kind(grid if type(grid) is tuple else tuple(grid), device, args, kwargs)
            except TypeError:
                return self.jit[grid](*args, **kwargs)
            plan = self.plans.get(key)
            if plan is None:
                return self._first(key, grid, device, args, kwargs)
        try:
            hook = rt.launch_exit_hook
            plan.launch(args, kwargs, _stream(device), hook if hook is not None and getattr(hook, "calls", True)
                        else None)
        except Exception as err:  # noqa: BLE001 - the launcher refused before launching: Triton's path
            self.broken = f"{type(err).__name__}: {err}"
            return self.jit[grid](*args, **kwargs)
        self.lean_calls += 1
        return plan.kernel

    def _quick(self, grid: Any, device: int, args: tuple, kwargs: dict) -> _Plan | None:
        """The plan of a call laid out like one seen before, by its quick key; None to ask `kind`."""
        for key in self.quick_keys.values():  # one layout a call site, as a rule
            try:
                plan = self.quick.get(key(grid, device, args, kwargs))
            except Exception:  # noqa: BLE001, S112 - laid out otherwise, or not hashable: the next, then `kind`
                continue
            if plan is not None:
                return plan
        return None

    def _first(self, key: tuple, grid: Any, device: int, args: tuple, kwargs: dict) -> Any:
        """The first call of a kind: Triton's path, and its compiled kernel kept as a plan (found by its
        quick key too, when it has one: a tuple grid, no tensor keyword)."""
        kernel = self.jit[grid](*args, **kwargs)
        if kernel is None or len(self.plans) >= 64:
            return kernel
        try:
            plan = self.plans[key] = _Plan(kernel, self.jit, tuple(grid), args, kwargs)
        except Exception as err:  # noqa: BLE001 - a Triton whose internals differ: its own path only
            self.broken = f"{type(err).__name__}: {err}"
            return kernel
        if type(grid) is tuple and not any(isinstance(v, _Tensor) for v in kwargs.values()):
            lay = layout(args, kwargs)
            quick = self.quick_keys.get(lay) or self.quick_keys.setdefault(lay, quick_key(args, kwargs))
            qk = quick(grid, device, args, kwargs)
            if qk is not None:
                self.quick[qk] = plan
        return kernel


def _knobs() -> Any:
    """`triton.knobs`, imported once (an import statement per launch costs more than the lookup)."""
    global _KNOBS
    if _KNOBS is None:
        from triton import knobs

        _KNOBS = knobs
    return _KNOBS


_KNOBS: Any = None


def _no_cuda(*a: Any) -> int:
    raise RuntimeError("kiln: this torch has no CUDA")


# The current CUDA device (`torch.cuda.current_device()` without its Python wrapper: the C call
# initialises CUDA lazily itself) and its raw stream, called directly (a wrapper's frame per launch).
_device = getattr(torch._C, "_cuda_getDevice", _no_cuda)
_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _no_cuda)


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
