"""Seeing the candidate's own kernels run, on a GPU and under the Triton interpreter alike.

`LaunchHooks` wraps, for the duration of a `with` block, every way a candidate launches a kernel
of its own: `triton.JITFunction.run` (compiled Triton), `InterpretedFunction.run`
(`TRITON_INTERPRET=1` on CPU), kiln's `CudaKernel.launch`, and the functions of compiled
extension modules (`load_inline`) reachable from the model. Each launch is reported to a
`LaunchObserver` with the kernel's name and its tensor arguments (and, for extensions, its
returned tensors), before and after it runs. While a launch runs, `depth > 0`, so the operator
accounting can leave out the launcher's own allocations and copies (never its compute).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten


class LaunchObserver(Protocol):
    def before(self, name: str, tensors: list[torch.Tensor]) -> Any: ...
    def after(self, name: str, tensors: list[torch.Tensor], state: Any, result: Any) -> None: ...


class CountingObserver:
    """Counts launches per kernel name; for extension functions, also notes those that return a
    PyTorch operator's output untouched (`snapshots`: storage -> (op, values) from the recorder)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.snapshots: dict[int, tuple[str, torch.Tensor]] = {}
        self.torch_results: dict[str, str] = {}

    def before(self, name: str, tensors: list[torch.Tensor]) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def after(self, name: str, tensors: list[torch.Tensor], state: Any, result: Any) -> None:
        if not name.startswith(EXT):
            return
        for t in _tensors(result):
            snap = self.snapshots.get(_storage(t))
            if snap is not None and snap[1].shape == t.shape and torch.equal(snap[1], t.detach()):
                self.torch_results[name] = snap[0]


class Tee:
    """Several observers on one set of hooks (each gets its own `before` state back)."""

    def __init__(self, *observers: LaunchObserver) -> None:
        self.observers = observers

    def before(self, name: str, tensors: list[torch.Tensor]) -> list[Any]:
        return [o.before(name, tensors) for o in self.observers]

    def after(self, name: str, tensors: list[torch.Tensor], state: Any, result: Any) -> None:
        for o, s in zip(self.observers, state, strict=True):
            o.after(name, tensors, s, result)


EXT = "ext:"
"""Prefix of launch names that are extension-module functions (host code, not a kernel)."""


class LaunchHooks:
    def __init__(self, observer: LaunchObserver, roots: list[Any] | None = None) -> None:
        self.observer = observer
        self.roots = roots or []
        self.depth = 0  # inside a kernel launcher: its own operators are not the candidate's
        self.ext_depth = 0  # inside an extension function: its operators are the candidate's
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> LaunchHooks:
        for cls, attr, namer, argpick in _launch_points():
            self._patch(cls, attr, namer, argpick)
        for mod in extension_modules(self.roots):
            self._patch_extension(mod)
        return self

    def __exit__(self, *exc: object) -> None:
        while self._undo:
            self._undo.pop()()

    def _patch(self, owner: Any, attr: str, namer: Callable, argpick: Callable) -> None:
        own = attr in owner.__dict__
        orig = owner.__dict__[attr] if own else getattr(owner, attr, None)
        if orig is None:
            return
        hooks = self

        @functools.wraps(orig)
        def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup"):
                return orig(obj, *args, **kwargs)
            return hooks._run(namer(obj), argpick(args, kwargs), lambda: orig(obj, *args, **kwargs))

        setattr(owner, attr, wrapper)
        self._undo.append(lambda: setattr(owner, attr, orig) if own else delattr(owner, attr))

    def _patch_extension(self, mod: types.ModuleType) -> None:
        for attr, fn in list(vars(mod).items()):
            if attr.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            self._wrap_ext_fn(mod, attr, fn)

    def _wrap_ext_fn(self, mod: types.ModuleType, attr: str, fn: Callable) -> None:
        hooks, name = self, f"{EXT}{mod.__name__}.{attr}"

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return hooks._run(name, _tensors((args, kwargs)), lambda: fn(*args, **kwargs), ext=True)

        setattr(mod, attr, wrapper)
        self._undo.append(lambda: setattr(mod, attr, fn))

    def _run(self, name: str, tensors: list[torch.Tensor], call: Callable[[], Any], ext: bool = False) -> Any:
        with _disable_current_modes():  # the observers' own tensor work is not the candidate's
            state = self.observer.before(name, tensors)
        if ext:
            self.ext_depth += 1
        else:
            self.depth += 1
        try:
            result = call()
        finally:
            if ext:
                self.ext_depth -= 1
            else:
                self.depth -= 1
        with _disable_current_modes():
            self.observer.after(name, tensors, state, result)
        return result


def _launch_points() -> Iterator[tuple[Any, str, Callable, Callable]]:
    with contextlib.suppress(Exception):
        from triton.runtime.jit import JITFunction

        yield JITFunction, "run", _triton_name, _all_tensor_args
    with contextlib.suppress(Exception):
        from triton.runtime.interpreter import InterpretedFunction

        yield InterpretedFunction, "run", _triton_name, _all_tensor_args
    with contextlib.suppress(Exception):
        from kiln.tools.cuda import CudaKernel

        yield CudaKernel, "launch", lambda k: str(getattr(k, "name", "cuda_kernel")), _cuda_kernel_args


def _triton_name(fn: Any) -> str:
    inner = getattr(fn, "fn", None)
    return str(getattr(inner, "__name__", None) or getattr(fn, "__name__", "triton_kernel"))


def _all_tensor_args(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    return _tensors((args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}))


def _cuda_kernel_args(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    launch_args = kwargs.get("args", args[2] if len(args) > 2 else ())
    return _tensors(list(launch_args))


def _tensors(obj: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return -id(t)


def extension_modules(roots: list[Any]) -> list[types.ModuleType]:
    """Compiled extension modules (.so) held by the given objects, their attributes and modules."""
    found: dict[int, types.ModuleType] = {}
    for root in roots:
        for value in _reachable(root):
            if isinstance(value, types.ModuleType) and _is_native(value):
                found[id(value)] = value
    return list(found.values())


def _reachable(root: Any) -> Iterator[Any]:
    spaces = [vars(root)] if hasattr(root, "__dict__") else []
    if isinstance(root, torch.nn.Module):
        spaces += [vars(m) for m in root.modules()]
    for space in spaces:
        yield from space.values()


def _is_native(mod: types.ModuleType) -> bool:
    """A compiled extension the candidate built (load_inline / load), not the stdlib or a package."""
    path = str(getattr(mod, "__file__", "") or "")
    if not path.endswith((".so", ".pyd")) or mod.__name__.split(".")[0] in sys.stdlib_module_names:
        return False
    return not any(part in path for part in ("site-packages", "dist-packages", sys.base_prefix + "/lib"))
