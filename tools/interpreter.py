"""Triton's CPU interpreter without its repeated set-up: every check on a CPU runs its kernels there.

Under `TRITON_INTERPRET=1` a kernel launch swaps `triton.language`'s builtins for interpreted ones
(`_patch_lang`, an `inspect.getmembers` walk over `tl`, `tl.core`, `tl.math` and `tl.tensor`), runs
every program, and restores them. Triton 3.9 also repeats that walk at *every call of a `@triton.jit`
helper* inside a program: `tl.max`, `tl.sum` and `tl.softmax` are such helpers, so a row softmax of
128 rows re-walked the language 7,168 times a launch, ~1.2 ms each: half of a CPU check's
correctness stage (bench/RESULTS.md, twenty-second session).

`install()` keeps each launch's first walk per set of language modules and skips the repeats: a
helper's walk patches the same modules in the same way as the one already done in that launch (its
result only depends on which of `tl` / `tl.core` the helper's globals hold), and Triton never
restores a helper's patches before the launch ends. So the patched state, and every kernel's
result, are what they were; only the repeated walks go. Installed only where the interpreter's code
has the shape described here (checked on the source), so another Triton keeps its own behaviour.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from types import ModuleType
from typing import Any

_LOCAL = threading.local()  # .done: ids of the language modules already patched in the running launch
_INSTALLED: list[bool] = []


def install() -> bool:
    """Skip the interpreter's repeated language walks in this process (idempotent). False, and
    nothing changed, when the interpreter is off or its code is not the shape this relies on."""
    if _INSTALLED:
        return _INSTALLED[0]
    if os.environ.get("TRITON_INTERPRET") != "1":  # asked again once a caller switches the interpreter on
        return False
    _INSTALLED.append(_wrap())
    return _INSTALLED[0]


def _wrap() -> bool:
    try:
        from triton.runtime import interpreter as it
    except Exception:  # noqa: BLE001 - no Triton (or a broken one): nothing to speed up
        return False
    if not _has_shape(it):
        return False
    patch, launch = it._patch_lang, it.GridExecutor.__call__
    langs_of = functools.partial(_langs, (it.tl, it.tl.core))

    @functools.wraps(patch)
    def patch_once(fn: Any) -> Any:
        done = getattr(_LOCAL, "done", None)
        if done is None:  # outside a launch: the interpreter's own behaviour
            return patch(fn)
        langs = langs_of(fn)
        if langs and langs <= done:
            return it._LangPatchScope()  # nothing to restore: the launch's own scope restores at its end
        done.update(langs)
        return patch(fn)

    @functools.wraps(launch)
    def launch_scoped(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_LOCAL, "done", None)
        _LOCAL.done = set()
        try:
            return launch(self, *args, **kwargs)
        finally:
            _LOCAL.done = outer

    it._patch_lang = patch_once
    it.GridExecutor.__call__ = launch_scoped
    return True


def _langs(lang_modules: tuple[ModuleType, ...], fn: Any) -> frozenset[int]:
    """Which of `tl` / `tl.core` a jitted function's globals hold: all `_patch_lang` walks over."""
    return frozenset(id(v) for v in getattr(fn, "__globals__", {}).values()
                     if isinstance(v, ModuleType) and any(v is lang for lang in lang_modules))


def _has_shape(it: ModuleType) -> bool:
    """The interpreter this relies on: a module-level `_patch_lang(fn)` returning a restorable scope,
    called by each launch (`GridExecutor.__call__`, which restores it) and by each jitted helper's
    call (`InterpretedFunction.__call__`, which never does)."""
    try:
        launch = inspect.getsource(it.GridExecutor.__call__)
        helper = inspect.getsource(it.InterpretedFunction.__call__)
        params = list(inspect.signature(it._patch_lang).parameters)
    except (AttributeError, OSError, TypeError, ValueError):
        return False
    return (params == ["fn"] and hasattr(it, "_LangPatchScope") and hasattr(it, "tl")
            and "_patch_lang(self.fn)" in launch and ".restore()" in launch
            and "_patch_lang(self.fn)" in helper and ".restore()" not in helper)
