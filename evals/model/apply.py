"""Putting a bundle's sites into a live model and taking them out again: the module forwards that
enter the kernel mode (scopes), the module sites' guarded forwards, and the handle that undoes it.
Only instance attributes change: the model's classes and state dict are untouched."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kiln.evals.model import sigs
from kiln.evals.model.defer import Placeholder, defer, fill, fill_all, tail
from kiln.evals.model.patch import KilnMode, Site, Table, custom_op
from kiln.evals.model.stock import stock_call

_NO_KW: dict = {}  # a stock call's keywords: none (never written to)
_is_compiling = torch.compiler.is_compiling
_MISSING: Any = object()


@dataclass
class Applied:
    """A model with kernels patched in; `remove()` (or leaving the `with` block) restores it and
    `install()` puts the same patches back (the timing loops toggle them, no rebuild)."""

    model: torch.nn.Module
    table: Table
    mode: KilnMode
    originals: list[tuple[torch.nn.Module, Any, Callable]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    in_mode: bool = False
    active: bool = True

    def remove(self) -> None:
        if not self.active:
            return
        for mod, fwd, _ in reversed(self.originals):
            if fwd is None:
                mod.__dict__.pop("forward", None)
            else:
                mod.forward = fwd
        for sites in self.table.fused.values():  # their spare placeholders' memory
            for site in sites:
                site.spare = None
        self.active = False

    def install(self) -> None:
        if self.active:
            return
        for mod, _, patched in self.originals:
            mod.forward = patched
        self.active = True

    def __enter__(self) -> Applied:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def call(self, inner: Callable, args: tuple, kwargs: dict, watch: bool = True) -> Any:
        """`inner(*args, **kwargs)` as a patched scope: the outermost scope, leaving, fills what
        placeholders are left; `watch`: in the kernel mode (entered once, by the first scope that
        watches). (A plain method, not a `contextlib` context manager: that one costs a generator.)"""
        t = self.table
        if t.depth:
            t.depth += 1
            try:
                return self._run(inner, args, kwargs, watch)
            finally:
                t.depth -= 1
        if not t.compile_kernels and torch.compiler.is_compiling():
            return inner(*args, **kwargs)
        t.depth = 1
        try:
            return self._run(inner, args, kwargs, watch)
        finally:
            t.depth = 0
            if t.pending:
                fill_all(t.pending)

    def _run(self, inner: Callable, args: tuple, kwargs: dict, watch: bool) -> Any:
        if not watch or self.in_mode:
            return inner(*args, **kwargs)
        self.in_mode = True
        try:
            with self.mode:
                return inner(*args, **kwargs)
        finally:
            self.in_mode = False


def wrap_forward(applied: Applied, mod: torch.nn.Module, make: Callable[[Callable], Callable]) -> None:
    """Replace one module instance's forward (its class and state dict are untouched)."""
    own = mod.__dict__.get("forward")
    inner = own if own is not None else types.MethodType(type(mod).forward, mod)
    mod.forward = make(inner)
    applied.originals.append((mod, own, mod.forward))


def scoped(applied: Applied, watch: bool) -> Callable[[Callable], Callable]:
    if not watch:
        return lambda inner: _filling(applied, inner)

    def make(inner: Callable) -> Callable:
        def forward(*args: Any, **kwargs: Any) -> Any:
            return applied.call(inner, args, kwargs, watch)
        return forward
    return make


def _filling(applied: Applied, inner: Callable) -> Callable:
    """A scope that enters no mode: `Applied.call` with `watch` off, inlined (every forward of every
    scope that holds a fused pair runs it). The outermost patched scope fills what is left."""
    table = applied.table

    def forward(*args: Any, **kwargs: Any) -> Any:
        if table.depth or (not table.compile_kernels and _is_compiling()):
            return inner(*args, **kwargs)
        table.depth = 1
        try:
            return inner(*args, **kwargs)
        finally:
            table.depth = 0
            if table.pending:
                fill_all(table.pending)
    return forward


def stock_site(applied: Applied, mod: torch.nn.Module, func: Callable, build: Callable) -> Callable[[Callable], Callable]:
    """A stock leaf module (stock.py) whose call a kernel may take, as a head, a single site or a fused
    pair's tail on a placeholder: routed here, with no mode entered. The sites are read once, here
    (heads only where their signature is the builder's positional form: the only form it makes): a
    call that is neither a head nor a single site (a tail module met by a plain tensor) costs a type
    check."""
    table = applied.table
    arity = len(build(mod, None))
    heads = tuple(s for s in table.fused.get(func, ()) if not s.guard.names and s.guard.n_pos == arity)
    singles = tuple(table.single.get(func, ()))
    takes = bool(heads or singles)

    def make(inner: Callable) -> Callable:
        def forward(x: Any, *rest: Any, **kw: Any) -> Any:
            if rest or kw:
                return inner(x, *rest, **kw)
            cls = type(x)
            if cls is Placeholder:  # the tail right after its head: the fused kernel
                done, out = tail(x, func, build(mod, x))
                if done:
                    return out
                fill(x)
            elif cls is not torch.Tensor or not takes:  # a Parameter, another subclass; or no kernel here
                return inner(x)
            compiling = _is_compiling()
            if compiling and not table.compile_kernels:
                return inner(x)
            args = build(mod, x)
            if table.depth and not compiling:  # a fused pair's head defers (eager, inside a scope)
                for site in heads:
                    if site.guard.ok(args):
                        return defer(table, site, func, args, _NO_KW, args)
            done, out = table.first(singles, args, compiling) if singles else (False, None)
            return out if done else inner(x)
        return forward
    return make


def module_site(applied: Applied, site: Site, mod: torch.nn.Module) -> Callable[[Callable], Callable]:
    """A module site (an RMSNorm class): its call as `F.rms_norm(x, weight, eps=...)`. Where the module
    keeps its epsilon is read once, here (a `getattr` default that misses formats an AttributeError)."""
    table = applied.table
    eps_name = next((n for n in ("eps", "variance_epsilon") if hasattr(mod, n)), None)

    def make(inner: Callable) -> Callable:
        def forward(x: Any, *rest: Any, **kw: Any) -> Any:
            compiling = _is_compiling()
            if not rest and not kw and not (compiling and not table.compile_kernels):
                eps = getattr(mod, eps_name) if eps_name is not None else None
                w = mod._parameters.get("weight", _MISSING)
                ok, out = table.run(site, (x, mod.weight if w is _MISSING else w),
                                    {"eps": float(eps) if eps is not None else None}, compiling)
                if ok:
                    return out
            return inner(x, *rest, **kw)
        return forward
    return make


def apply_entries(model: torch.nn.Module, sites: list[Site], compile_kernels: bool) -> Applied:
    table = Table(compile_kernels=compile_kernels)
    applied = Applied(model, table, KilnMode(table))
    watch: dict[str, bool] = {}  # scope path -> whether it enters the kernel mode
    stock: dict[str, tuple[Callable, Callable]] = {}  # stock leaf path -> (its functional, its builder)
    for site in sites:
        e = site.entry
        if e.kind == "module":
            for path in e.module_paths:
                mod = _submodule(model, path)
                if mod is None or type(mod).__name__ != e.module_class:
                    applied.missing.append(f"{e.group}: no {e.module_class} at {path or '<model>'}")
                    continue
                wrap_forward(applied, mod, module_site(applied, site, mod))
            custom_op(site.kernel)
            continue
        func = sigs.resolve(e.sig.op)
        sigs.positional_names(func)
        if e.tail is not None:
            sigs.positional_names(sigs.resolve(e.tail.op))
        custom_op(site.kernel)  # registered now: torch.compile must not trace its creation
        (table.fused if e.kind == "fused" else table.single).setdefault(func, []).append(site)
        _plan_scopes(model, e, func, watch, stock)
    for path, (func, build) in stock.items():
        mod = _submodule(model, path)
        assert mod is not None
        wrap_forward(applied, mod, stock_site(applied, mod, func, build))
    for path, w in watch.items():
        mod = _submodule(model, path)
        if mod is None:
            applied.missing.append(f"no module at {path}")
            continue
        wrap_forward(applied, mod, scoped(applied, w))
    applied.mode.watch = table.watched()
    return applied


def _plan_scopes(model: torch.nn.Module, e: Any, func: Callable, watch: dict[str, bool],
                 stock: dict[str, tuple[Callable, Callable]]) -> None:
    """Where a site is intercepted: at its stock leaf module when it has one (no mode), else in the
    kernel mode over the narrowest scope that holds the call. A fused pair's head goes the same way;
    its tail is met by the placeholder itself (or at a stock tail module), and its common scope only
    fills what is left when it ends. A fused entry with no head paths (an older bundle) keeps the mode
    over the common scope."""
    fused = e.kind == "fused"
    for path in e.module_paths if fused else e.scopes:
        _intercept(model, path, func, watch, stock)
    if not fused:
        return
    tail_func = sigs.resolve(e.tail.op)
    for path in e.scopes:
        watch[path] = watch.get(path, False) or not e.module_paths
        scope = _submodule(model, path)
        for name, mod in scope.named_modules() if scope is not None else ():
            call = stock_call(mod)
            full = f"{path}.{name}" if path and name else path or name
            if call is not None and call[0] is tail_func and not watch.get(full):
                stock[full] = call


def _intercept(model: torch.nn.Module, path: str, func: Callable, watch: dict[str, bool],
               stock: dict[str, tuple[Callable, Callable]]) -> None:
    mod = _submodule(model, path)
    call = stock_call(mod) if mod is not None else None
    if call is not None and call[0] is func and not watch.get(path):
        stock[path] = call
    else:
        stock.pop(path, None)
        watch[path] = True


def _submodule(model: torch.nn.Module, path: str) -> torch.nn.Module | None:
    try:
        return model.get_submodule(path) if path else model
    except AttributeError:
        return None
