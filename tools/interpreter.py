"""Triton's CPU interpreter without its repeated set-up: every check on a CPU runs its kernels there.

Under `TRITON_INTERPRET=1` a kernel launch swaps `triton.language`'s builtins for interpreted ones
(`_patch_lang`, an `inspect.getmembers` walk over `tl`, `tl.core`, `tl.math` and `tl.tensor`), runs
every program, and restores them. Triton 3.9 also repeats that walk at *every call of a `@triton.jit`
helper* inside a program: `tl.max`, `tl.sum` and `tl.softmax` are such helpers, so a row softmax of
128 rows re-walked the language 7,168 times a launch, ~1.2 ms each: half of a CPU check's
correctness stage (bench/RESULTS.md, twenty-second session).

`install()` does two things. It keeps each launch's first walk per set of language modules and skips the repeats: a
helper's walk patches the same modules in the same way as the one already done in that launch (its
result only depends on which of `tl` / `tl.core` the helper's globals hold), and Triton never
restores a helper's patches before the launch ends. And it turns off the interpreter's integer
overflow sanitizer while its debug mode is off: every int32 add, sub and mul then computed the
result again in int64 and two comparisons (~0.26 ms a call, a quarter of a pooling kernel's time),
for a `device_assert` that does nothing without debug. The GPU compiler drops that code for the
same reason, so integers wrap the same way on both. So the patched state, and every kernel's
result, are what they were; only the repeated work goes. Each is installed only where the
interpreter's code has the shape described here (checked on the source), so another Triton keeps
its own behaviour.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from types import ModuleType
from typing import Any

_LOCAL = threading.local()  # .done: ids of the language modules already patched in the running launch
_APPLIED: dict[str, bool] = {}


def install() -> dict[str, bool]:
    """Both shortcuts, in this process (idempotent): which of them are in place. Nothing changes
    where the interpreter is off, and a shortcut whose code is not the shape it relies on is left out."""
    if not _APPLIED and os.environ.get("TRITON_INTERPRET") == "1":  # else asked again once a caller switches it on
        _APPLIED.update(helper_walks=_wrap(), overflow_sanitizer=_no_dead_sanitizer())
    return dict(_APPLIED) or {"helper_walks": False, "overflow_sanitizer": False}


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


def _no_dead_sanitizer() -> bool:
    """The interpreter's options without the overflow sanitizer, where its assert is a no-op anyway
    (debug off); True when the sanitizer is off now (or was already)."""
    import dataclasses

    try:
        from triton.language import semantic
        from triton.runtime import interpreter as it
    except Exception:  # noqa: BLE001 - no Triton (or a broken one): nothing to speed up
        return False
    builder = getattr(it, "interpreter_builder", None)
    opts = getattr(builder, "options", None)
    try:
        assert_src = inspect.getsource(semantic.TritonSemantic.device_assert)
        sanitize_src = inspect.getsource(semantic.TritonSemantic.binary_op_sanitize_overflow_impl)
    except (AttributeError, OSError, TypeError):
        return False
    if not dataclasses.is_dataclass(opts) or getattr(opts, "debug", True) or not hasattr(opts, "sanitize_overflow"):
        return False
    if "if not self.builder.options.debug:" not in assert_src or "not self.builder.options.sanitize_overflow" \
            not in sanitize_src:
        return False
    builder.options = dataclasses.replace(opts, sanitize_overflow=False)
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
