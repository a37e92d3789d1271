"""Patch a live model with verified kernels, without editing its source.

- *Function sites* (`F.group_norm`, `x.softmax(-1)`, ...): a `TorchFunctionMode` is entered around
  the forward of the modules where the calls happen (their *scopes*); a call whose function, argument
  shapes, dtypes, strides, devices and values match a kernel's recorded signature runs the kernel; any
  other call (another shape, autograd needed, ...) runs the original op.
- *Module sites* (RMSNorm classes): the module instance's `forward` is wrapped the same way.
- *Fused pairs* (`group_norm -> silu`, `softmax(fp32) -> .to(bf16)`): the head returns an empty
  placeholder and remembers its call; when the next call is the expected tail on that placeholder, one
  fused kernel produces the tail's result. Anything else that touches the placeholder first (another
  op, the end of the scope) fills it with the head's real result, so no reader ever sees it empty.
- Under `torch.compile` each kernel is a `torch.library` custom op with a fake implementation (the
  recorded output shape), or, with compile policy "original", the original ops (inductor fuses them).
  Fused placeholders are eager-only.

Everything is undone by `Applied.remove()`. Kernels are inference kernels: a call that needs
autograd falls back to the original op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kiln.evals.model import sigs
from kiln.evals.model.guard import Guard
from kiln.evals.model.records import BundleEntry, CallSig

HEAD_MARK = sigs.HEAD_MARK
_OPS: dict[str, Any] = {}


def load_kernel_module(path: Path) -> Any:
    """A bundle's kernel file as a module (imported once per process)."""
    from kiln.tools.check.worker import load_module

    key = str(path.resolve())
    if key not in _MODULES:
        _MODULES[key] = load_module(key, "bundle_kernel")
    return _MODULES[key]


_MODULES: dict[str, Any] = {}


class Kernel:
    """A kernel file's ModelNew, built once per set of live parameters (it shares their storage)."""

    def __init__(self, module: Any, out: Any, op_name: str) -> None:
        self.cls = module.ModelNew
        self.out = out
        self.cache: dict[tuple, torch.nn.Module] = {}
        self.op_name = op_name

    def instance(self, params: list[torch.Tensor]) -> torch.nn.Module:
        key: Any = []  # flat: three entries a parameter (its storage, its in-place version, its dtype)
        for p in params:
            key += (p.data_ptr(), p._version, p.dtype)
        key = tuple(key)
        inst = self.cache.get(key)
        if inst is None:
            if len(self.cache) > 256:
                self.cache.clear()
            with torch.no_grad():
                inst = self.cls(*params)
            self.cache[key] = inst
        return inst

    def __call__(self, acts: list[torch.Tensor], params: list[torch.Tensor]) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return custom_op(self)(acts, params)
        return self.run(acts, params)

    def run(self, acts: list[torch.Tensor], params: list[torch.Tensor]) -> torch.Tensor:
        """The eager call (the caller knows it is not being compiled)."""
        fwd = self.instance(params).forward  # not Module.__call__: a kernel module has no hooks
        if torch.is_grad_enabled():
            with torch.no_grad():
                return fwd(*acts)
        return fwd(*acts)


def custom_op(k: Kernel) -> Any:
    """The kernel as `torch.ops.kiln_bundle.<name>`, with a fake (meta) implementation for compile."""
    if k.op_name in _OPS:
        return _OPS[k.op_name]
    out = k.out

    @torch.library.custom_op(f"kiln_bundle::{k.op_name}", mutates_args=())
    def op(acts: list[torch.Tensor], params: list[torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return k.instance(params)(*acts)

    @op.register_fake
    def _(acts: list[torch.Tensor], params: list[torch.Tensor]) -> torch.Tensor:
        dtype = getattr(torch, out.dtype)
        return torch.empty_strided(out.shape, out.stride, dtype=dtype, device=acts[0].device)

    _OPS[k.op_name] = op
    return op


class Site:
    """One bundle entry in a live model: its guard(s) and its kernel."""

    def __init__(self, entry: BundleEntry, kernel: Kernel) -> None:
        self.entry, self.kernel = entry, kernel
        self.guard = Guard(entry.sig)
        self.tail = Guard(entry.tail, skip_head=True) if entry.tail is not None else None

    def try_run(self, args: tuple, kwargs: dict, func: Any = None, compiling: bool | None = None) -> tuple[bool, Any]:
        """(True, the kernel's result) when the call matches, else (False, None); `compiling` when the
        caller has already asked torch.compiler."""
        if func is not None and kwargs:
            args, kwargs = sigs.normalize(func, args, kwargs)
        values = self.guard.match(args, kwargs)
        if values is None:
            return False, None
        acts, params = self.guard.split(values)
        return True, (self.kernel.run(acts, params) if compiling is False else self.kernel(acts, params))

    # A fused pair's tail, read once from its signature (the same at every call).
    @cached_property
    def tail_func(self) -> Any:
        assert self.entry.tail is not None
        return sigs.resolve(self.entry.tail.op)

    @cached_property
    def tail_writes(self) -> bool:
        assert self.entry.tail is not None
        return _writes_input(self.entry.tail)

    @cached_property
    def head_at(self) -> tuple[int, ...]:
        """Where in the tail's arguments the head's output stands."""
        assert self.entry.tail is not None
        return tuple(i for i, a in enumerate(self.entry.tail.args) if a.param == HEAD_MARK)

    @cached_property
    def placeholder(self) -> tuple[tuple, tuple, torch.dtype]:
        o = self.entry.sig.out
        assert o is not None
        return tuple(o.shape), tuple(o.stride), getattr(torch, o.dtype)


@dataclass
class Pending:
    site: Site
    func: Callable
    args: tuple
    kwargs: dict
    values: list[Any]


@dataclass
class Table:
    single: dict[Any, list[Site]] = field(default_factory=dict)
    fused: dict[Any, list[Site]] = field(default_factory=dict)
    compile_kernels: bool = True
    calls: dict[str, int] = field(default_factory=dict)  # group -> kernel calls (for tests and reports)
    ranges: bool = False  # each kernel call in a `kiln.group.<id>` profiler range (gputime.py)

    def count(self, group: str) -> None:
        self.calls[group] = self.calls.get(group, 0) + 1

    def watched(self) -> frozenset:
        return frozenset(self.single) | frozenset(self.fused)


class KilnMode(TorchFunctionMode):
    """Routes matching calls to kernels; every other call runs unchanged (after one set lookup)."""

    def __init__(self, table: Table) -> None:
        super().__init__()
        self.table = table
        self.watch: frozenset = frozenset()
        self.pending: dict[int, tuple[torch.Tensor, Pending]] = {}

    def __torch_function__(self, func: Callable, types_: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if not self.pending and func not in self.watch:  # the common case: one lookup, then the op
            return func(*args, **(kwargs or {}))
        kwargs = kwargs or {}
        if self.pending:
            done, out = self._pending_call(func, args, kwargs)
            if done:
                return out
        compiling = torch.compiler.is_compiling()
        if compiling and not self.table.compile_kernels:
            return func(*args, **kwargs)
        nargs, nkw = sigs.normalize(func, args, kwargs) if kwargs else (args, kwargs)
        if not compiling:
            for site in self.table.fused.get(func, ()):
                values = site.guard.match(nargs, nkw)
                if values is not None:
                    return self._defer(site, func, args, kwargs, values)
        for site in self.table.single.get(func, ()):
            ok, out = self._run(site, nargs, nkw, compiling)
            if ok:
                return out
        return func(*args, **kwargs)

    def _run(self, site: Site, args: tuple, kwargs: dict, compiling: bool | None = None) -> tuple[bool, Any]:
        if not self.table.ranges:
            ok, out = site.try_run(args, kwargs, compiling=compiling)
        else:
            with torch.profiler.record_function(f"kiln.group.{site.entry.group}"):
                ok, out = site.try_run(args, kwargs, compiling=compiling)
        if ok:
            self.table.count(site.entry.group)
        return ok, out

    def _defer(self, site: Site, func: Callable, args: tuple, kwargs: dict, values: list[Any]) -> torch.Tensor:
        shape, stride, dtype = site.placeholder
        ph = torch.empty_strided(shape, stride, dtype=dtype, device=values[0].device
                                 if isinstance(values[0], torch.Tensor) else None)
        self.pending[id(ph)] = (ph, Pending(site, func, args, kwargs, values))
        return ph

    def _pending_call(self, func: Callable, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        if _metadata(func):  # x.shape, x.size(), x.dtype ...: no data read, the placeholder can wait
            return False, None
        found = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor) and id(v) in self.pending]
        for ph in found:
            _, p = self.pending[id(ph)]
            tguard = p.site.tail
            assert tguard is not None
            values = tguard.values(*sigs.normalize(func, args, kwargs)) if func is p.site.tail_func else None
            if values is not None and any(values[i] is ph for i in p.site.head_at) and tguard.ok(values):
                del self.pending[id(ph)]
                return True, self._fused(p, ph, tguard, values)
            self.fill(id(ph))
        return False, None

    def _fused(self, p: Pending, ph: torch.Tensor, tguard: Guard, values: list[Any]) -> Any:
        acts, params = p.site.guard.split(p.values)
        tacts, tparams = tguard.split(values)
        self.table.count(p.site.entry.group)
        if self.table.ranges:
            with torch.profiler.record_function(f"kiln.group.{p.site.entry.group}"):
                out = p.site.kernel(acts + tacts, params + tparams)
        else:
            out = p.site.kernel(acts + tacts, params + tparams)
        if p.site.tail_writes:  # relu_(bn(x)): the placeholder becomes the result, no copy
            ph.set_(out.untyped_storage(), out.storage_offset(), out.size(), out.stride())
            return ph
        return out

    def fill(self, key: int) -> None:
        """The head's real result into its placeholder (its own kernel when one is patched)."""
        ph, p = self.pending.pop(key)
        with torch.no_grad():
            nargs, nkw = sigs.normalize(p.func, p.args, p.kwargs) if p.kwargs else (p.args, p.kwargs)
            for site in self.table.single.get(p.func, ()):
                ok, out = self._run(site, nargs, nkw)
                if ok:
                    ph.copy_(out)
                    return
            ph.copy_(p.func(*p.args, **p.kwargs))

    def fill_all(self) -> None:
        for key in list(self.pending):
            self.fill(key)


META_PROPS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "is_sparse"}
META_METHODS = {"size", "dim", "stride", "numel", "is_contiguous", "element_size", "nelement", "ndimension",
                "get_device", "is_floating_point"}


def _metadata(func: Callable) -> bool:
    owner = getattr(func, "__self__", None)
    if getattr(func, "__name__", "") == "__get__" and getattr(owner, "__name__", "") in META_PROPS:
        return True
    return getattr(func, "__name__", "") in META_METHODS


def _writes_input(tail: CallSig) -> bool:
    names = sigs.positional_names(sigs.resolve(tail.op)) or ()
    return tail.op.endswith("_") or any((a.name or (names[i] if i < len(names) else "")) == "inplace"
                                        and a.src == "True" for i, a in enumerate(tail.args))
