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
from kiln.evals.model.patch import KilnMode, Site, Table, custom_op


@dataclass
class Applied:
    """A model with kernels patched in; `remove()` (or leaving the `with` block) restores it and
    `install()` puts the same patches back (the timing loops toggle them, no rebuild)."""

    model: torch.nn.Module
    table: Table
    mode: KilnMode
    originals: list[tuple[torch.nn.Module, Any, Callable]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    depth: int = 0
    active: bool = True

    def remove(self) -> None:
        if not self.active:
            return
        for mod, fwd, _ in reversed(self.originals):
            if fwd is None:
                mod.__dict__.pop("forward", None)
            else:
                mod.forward = fwd
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

    def call(self, inner: Callable, args: tuple, kwargs: dict) -> Any:
        """`inner(*args, **kwargs)` in the kernel mode: the outermost scope enters it and, leaving,
        fills what placeholders are left; nested scopes only count. (A plain method, not a
        `contextlib` context manager: that one costs a generator per call.)"""
        if self.depth:
            self.depth += 1
            try:
                return inner(*args, **kwargs)
            finally:
                self.depth -= 1
        if not self.table.compile_kernels and torch.compiler.is_compiling():
            return inner(*args, **kwargs)
        self.depth = 1
        try:
            with self.mode:
                try:
                    return inner(*args, **kwargs)
                finally:
                    self.mode.fill_all()
        finally:
            self.depth = 0


def wrap_forward(applied: Applied, mod: torch.nn.Module, make: Callable[[Callable], Callable]) -> None:
    """Replace one module instance's forward (its class and state dict are untouched)."""
    own = mod.__dict__.get("forward")
    inner = own if own is not None else types.MethodType(type(mod).forward, mod)
    mod.forward = make(inner)
    applied.originals.append((mod, own, mod.forward))


def scoped(applied: Applied) -> Callable[[Callable], Callable]:
    def make(inner: Callable) -> Callable:
        def forward(*args: Any, **kwargs: Any) -> Any:
            return applied.call(inner, args, kwargs)
        return forward
    return make


def module_site(applied: Applied, site: Site, mod: torch.nn.Module) -> Callable[[Callable], Callable]:
    def make(inner: Callable) -> Callable:
        def forward(x: Any, *rest: Any, **kw: Any) -> Any:
            compiling = torch.compiler.is_compiling()
            if not rest and not kw and not (compiling and not applied.table.compile_kernels):
                eps = getattr(mod, "eps", getattr(mod, "variance_epsilon", None))
                call = ((x, mod.weight), {"eps": float(eps) if eps is not None else None})
                if applied.table.ranges:  # kernel time per group (measure.py)
                    with torch.profiler.record_function(f"kiln.group.{site.entry.group}"):
                        ok, out = site.try_run(*call, compiling=compiling)
                else:
                    ok, out = site.try_run(*call, compiling=compiling)
                if ok:
                    applied.table.count(site.entry.group)
                    return out
            return inner(x, *rest, **kw)
        return forward
    return make


def apply_entries(model: torch.nn.Module, sites: list[Site], compile_kernels: bool) -> Applied:
    table = Table(compile_kernels=compile_kernels)
    applied = Applied(model, table, KilnMode(table))
    scopes: list[str] = []
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
        scopes += [s for s in e.scopes if s not in scopes]
    for path in scopes:
        mod = _submodule(model, path)
        if mod is None:
            applied.missing.append(f"no module at {path}")
            continue
        wrap_forward(applied, mod, scoped(applied))
    applied.mode.watch = table.watched()
    return applied


def _submodule(model: torch.nn.Module, path: str) -> torch.nn.Module | None:
    try:
        return model.get_submodule(path) if path else model
    except AttributeError:
        return None
