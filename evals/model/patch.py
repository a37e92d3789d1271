"""Patch a live model with verified kernels, without editing its source.

- *Function sites* (`F.group_norm`, `x.softmax(-1)`, ...): where the call is a stock torch.nn leaf
  module's own forward (`nn.GroupNorm`, `nn.SiLU`, stock.py), that module's forward is wrapped and
  nothing else is intercepted; elsewhere a `TorchFunctionMode` is entered around the forward of the
  innermost module where the calls happen (their *scopes*). A call whose function, argument shapes,
  dtypes, strides, devices and values match a kernel's recorded signature runs the kernel; any other
  call (another shape, autograd needed, ...) runs the original op.
- *Module sites* (RMSNorm classes): the module instance's `forward` is wrapped the same way.
- *Fused pairs* (`group_norm -> silu`, `softmax(fp32) -> .to(bf16)`): the head (intercepted like a
  function site) returns an empty placeholder that sees every op on it (defer.py): the expected tail
  on it runs one fused kernel; anything else fills it with the head's real result first, so no reader
  ever sees it empty. The pair's common scope only fills what is left when its forward ends: the ops
  around the pair run with no interception.
- Under `torch.compile` each kernel is a `torch.library` custom op with a fake implementation (the
  recorded output shape), or, with compile policy "original", the original ops (inductor fuses them).
  Fused placeholders are eager-only.

Everything is undone by `Applied.remove()`. Kernels are inference kernels: a call that needs
autograd falls back to the original op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kiln.evals.model import sigs
from kiln.evals.model.defer import Placeholder, defer
from kiln.evals.model.guard import Guard, compiled, versions
from kiln.evals.model.records import BundleEntry, CallSig

HEAD_MARK = sigs.HEAD_MARK
_OPS: dict[str, Any] = {}


def load_kernel_module(path: Path) -> Any:
    """A bundle's kernel file as a module (imported once per process)."""
    from kiln.tools import interpreter
    from kiln.tools.check.worker import load_module

    interpreter.install()  # a CPU run's kernels go through Triton's interpreter in this process
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
        self.forwards: dict[tuple, Callable] = {}  # the same key -> its instance's bound forward
        self.op_name = op_name

    def instance(self, params: Sequence[torch.Tensor]) -> torch.nn.Module:
        """The ModelNew for these parameters: one per (storage, in-place version) of each (their dtypes
        are the site's guard's; a call is guarded before it gets here)."""
        key = param_key(len(params))(params)
        inst = self.cache.get(key)
        if inst is None:
            if len(self.cache) > 256:
                self.cache.clear()
            with torch.no_grad():
                inst = self.cls(*params)
            self.cache[key] = inst
        return inst

    def __call__(self, acts: Sequence[torch.Tensor], params: Sequence[torch.Tensor]) -> torch.Tensor:
        if _is_compiling():
            return custom_op(self)(list(acts), list(params))
        return self.run(acts, params)

    def run(self, acts: Sequence[torch.Tensor], params: Sequence[torch.Tensor]) -> torch.Tensor:
        """The eager call (the caller knows it is not being compiled), with torch functions handled
        plainly inside: a kernel's own torch calls never come back to the kernel mode or a placeholder."""
        key = _KEYS.get(len(params)) or param_key(len(params))
        fwd = self.forwards.get(key(params))  # `instance`, inlined: every patched call
        if fwd is None:
            fwd = self.instance(params).forward  # not Module.__call__: a kernel module has no hooks
            if len(self.forwards) > 256:
                self.forwards.clear()
            self.forwards[key(params)] = fwd
        with _NoTorchFunction():
            if _grad_enabled():
                with torch.no_grad():
                    return fwd(*acts)
            return fwd(*acts)


def param_key(n: int) -> Callable[[Sequence[torch.Tensor]], tuple]:
    """`params -> (p0.data_ptr(), p0._version, p1.data_ptr(), ...)` for n parameters, one expression."""
    key = _KEYS.get(n)
    if key is None:
        body = "".join(f"p[{i}].data_ptr(), p[{i}]._version, " for i in range(n))
        key = _KEYS[n] = compiled("param_key", "p", [f"return ({body})"])
    return key


_KEYS: dict[int, Callable] = {}
_NO_KW: dict = {}
_is_compiling = torch.compiler.is_compiling  # module-level names: a `torch.x.y` lookup per call costs
_grad_enabled = torch.is_grad_enabled
_NoTorchFunction = torch._C.DisableTorchFunction


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
        self.group = entry.group
        self.spare: Any = None  # a fused head's last placeholder, taken again when nothing holds it (defer.py)
        self.spare_device = -2  # its device (`get_device()`)
        self.guard = Guard(entry.sig)
        self.tail = Guard(entry.tail, skip_head=True) if entry.tail is not None else None

    def try_run(self, args: tuple, kwargs: dict, func: Any = None, compiling: bool | None = None) -> tuple[bool, Any]:
        """(True, the kernel's result) when the call matches, else (False, None); `compiling` when the
        caller has already asked torch.compiler."""
        if func is not None and kwargs:
            args, kwargs = sigs.normalize(func, args, kwargs)
        values = self.guard.match(args, kwargs, fast=compiling is False)  # (the fast check breaks a graph)
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
    def tensor_at(self) -> list[int]:
        """Where in the head's arguments its tensors stand (their versions are checked when deferred)."""
        return [i for i, a in enumerate(self.entry.sig.args) if a.kind != "value"]

    @cached_property
    def head_versions(self) -> Callable[[Any], tuple]:
        """The in-place versions of the head's tensors, from its arguments."""
        return versions(self.tensor_at)

    @cached_property
    def fused_args(self) -> Callable[[Any, Any], tuple[tuple, tuple]]:
        """`(head values, tail values) -> (activations, parameters)` of the fused kernel, in the
        problem's order (the head's, then the tail's own), one expression."""
        assert self.tail is not None
        g, t = self.guard, self.tail
        acts = "".join([f"h[{i}], " for i in g.acts] + [f"t[{i}], " for i in t.acts])
        params = "".join([f"h[{i}], " for i in g.params] + [f"t[{i}], " for i in t.params])
        return compiled("fused_args", "h, t", [f"return (({acts}), ({params}))"])

    @cached_property
    def placeholder(self) -> tuple[tuple, tuple, torch.dtype, bool]:
        """The deferred head's output: shape, stride, dtype, and whether it is built like the head's
        first argument (`empty_like` gives the same shape, strides and dtype)."""
        o, first = self.entry.sig.out, self.entry.sig.args[0].tensor if self.entry.sig.args else None
        assert o is not None
        shape, stride, dtype = tuple(o.shape), tuple(o.stride), getattr(torch, o.dtype)
        like = first is not None and (tuple(first.shape), tuple(first.stride), first.dtype) == (shape, stride, o.dtype)
        if like:  # preserve_format keeps these strides (dense, non-overlapping), not any others
            like = torch.empty_like(torch.empty_strided(shape, stride, dtype=dtype, device="meta")).stride() == stride
        return shape, stride, dtype, like


@dataclass
class Table:
    single: dict[Any, list[Site]] = field(default_factory=dict)
    fused: dict[Any, list[Site]] = field(default_factory=dict)
    compile_kernels: bool = True
    calls: dict[str, int] = field(default_factory=dict)  # group -> kernel calls (for tests and reports)
    ranges: bool = False  # each kernel call in a `kiln.group.<id>` profiler range (gputime.py)
    pending: list[Any] = field(default_factory=list)  # weakrefs to the placeholders deferred in this scope
    depth: int = 0  # patched scopes being run (a head defers only inside one: its end fills the rest)

    def count(self, group: str) -> None:
        self.calls[group] = self.calls.get(group, 0) + 1

    def watched(self) -> frozenset:
        return frozenset(self.single) | frozenset(self.fused)

    def run(self, site: Site, args: tuple, kwargs: dict, compiling: bool | None = None) -> tuple[bool, Any]:
        if not self.ranges:
            ok, out = site.try_run(args, kwargs, compiling=compiling)
        else:
            with torch.profiler.record_function(f"kiln.group.{site.entry.group}"):
                ok, out = site.try_run(args, kwargs, compiling=compiling)
        if ok:
            self.count(site.entry.group)
        return ok, out

    def first(self, sites: Sequence[Site], args: tuple, compiling: bool) -> tuple[bool, Any]:
        """(True, the result) of the first of these single sites whose kernel takes the positional call
        `args`; (False, None) when none does (`run` for a stock module's call, with fewer steps)."""
        for site in sites:
            g = site.guard
            if len(args) == g.n_pos and not g.names and g.ok(args, not compiling):
                acts, params = g.split(args)
                group = site.group
                self.calls[group] = self.calls.get(group, 0) + 1
                if self.ranges:
                    with torch.profiler.record_function(f"kiln.group.{group}"):
                        return True, site.kernel(acts, params)
                return True, (site.kernel(acts, params) if compiling else site.kernel.run(acts, params))
        return False, None

    def route(self, func: Callable, args: tuple, kwargs: dict, compiling: bool) -> tuple[bool, Any]:
        """(True, the result) when a kernel takes the call `func(*args, **kwargs)`: a fused pair's head
        defers (eager, inside a scope), else a single site runs; (False, None) when none does."""
        nargs, nkw = sigs.normalize(func, args, kwargs) if kwargs else (args, kwargs)
        if not compiling and self.depth:
            for site in self.fused.get(func, ()):
                values = site.guard.match(nargs, nkw)
                if values is not None:
                    return True, defer(self, site, func, args, kwargs, values)
        for site in self.single.get(func, ()):
            ok, out = self.run(site, nargs, nkw, compiling)
            if ok:
                return True, out
        return False, None


class KilnMode(TorchFunctionMode):
    """Routes matching calls to kernels; every other call runs unchanged (after one set lookup). A
    call on a placeholder goes on to the placeholder's own handler (defer.py)."""

    def __init__(self, table: Table) -> None:
        super().__init__()
        self.table = table
        self.watch: frozenset = frozenset()

    def __torch_function__(self, func: Callable, types_: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func not in self.watch or Placeholder in types_:  # the common case: one lookup, then the op
            return func(*args, **kwargs)
        compiling = torch.compiler.is_compiling()
        if compiling and not self.table.compile_kernels:
            return func(*args, **kwargs)
        done, out = self.table.route(func, args, kwargs, compiling)
        return out if done else func(*args, **kwargs)


def _writes_input(tail: CallSig) -> bool:
    names = sigs.positional_names(sigs.resolve(tail.op)) or ()
    return tail.op.endswith("_") or any((a.name or (names[i] if i < len(names) else "")) == "inplace"
                                        and a.src == "True" for i, a in enumerate(tail.args))
