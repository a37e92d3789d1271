"""A fused pair's placeholder: the head's output, not computed yet, as a tensor that sees its readers.

When a fused pair's head matches, it returns an empty tensor whose class is `Placeholder` (the same
object, its class swapped) and remembers its call. Every torch function, Tensor method or operator
that touches the placeholder comes to `Placeholder.__torch_function__` (no TorchFunctionMode needed,
so the ops around it run untouched):

- the expected tail on it (shapes, dtypes, strides and values guarded) runs the one fused kernel;
- a metadata read (`x.shape`, `x.size()`) waits;
- anything else (another op, an in-place write, `.data`, printing) first fills it with the head's
  real result (its own kernel when one is patched), then runs as written.

Filled (or written by an in-place tail), it turns back into a plain `torch.Tensor`, so later ops pay
nothing. After an out-of-place tail it stays a placeholder, *spent*: usually nothing holds it any
more; a later reader (the head's output had another consumer) gets it filled. The patched scope that
holds the pair fills the placeholders still alive when its forward ends (they are tracked by weak
reference), so none escapes empty. A head input written in place before the placeholder is read is
detected (tensor versions) and raised: the head's result cannot be recomputed then.

Each site keeps its last placeholder as a *spare* (when built like the head's first argument): the
next deferred call of that site takes it again when nothing else holds it (`sys.getrefcount`: only
the site), so a forward allocates no placeholder memory after the first; a spare read, filled or held
elsewhere is never taken. The cost is one head output's memory per fused site between forwards
(`Applied.remove()` lets them go). At a scope's end a spare that nothing else holds is not filled
(nobody can read it); it only lets go of its head's arguments.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch

from kiln.evals.model import sigs

META_PROPS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "is_sparse"}
META_METHODS = {"size", "dim", "stride", "numel", "is_contiguous", "element_size", "nelement", "ndimension",
                "get_device", "is_floating_point"}


_NO_KW: dict = {}
_refs = sys.getrefcount


class Pending:
    """A deferred head call, kept on its placeholder until the placeholder is read."""

    __slots__ = ("site", "table", "func", "args", "kwargs", "values", "versions", "spent")

    def __init__(self, site: Any, table: Any, func: Callable, args: tuple, kwargs: dict, values: Any) -> None:
        self.site, self.table, self.func, self.args, self.kwargs, self.values = site, table, func, args, kwargs, values
        self.versions = site.head_versions(values)  # the head's tensors' versions, checked again when read
        self.spent = False  # the fused tail ran: the placeholder is filled only if it is read again


class Placeholder(torch.Tensor):
    """A deferred head's output (never built directly: `defer` swaps an empty tensor's class)."""

    _kiln: Pending | None  # None: a site's spare that nothing else holds (defer)

    @classmethod
    def __torch_function__(cls, func: Callable, types_: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or _NO_KW
        found = _placeholders(args, kwargs)
        if len(found) == 1:  # the expected tail first (`tail` reads no placeholder through torch)
            p = found[0]._kiln
            if p is not None and func is p.site.tail_func:
                done, out = tail(found[0], func, *sigs.normalize(func, args, kwargs))
                if done:
                    return out
        with torch._C.DisableTorchFunctionSubclass():
            if _metadata(func):  # no data read: the placeholder can wait
                return func(*args, **kwargs)
            if any(ph._kiln is None for ph in found):
                _unreachable()
            for ph in found:
                fill(ph)
            return func(*args, **kwargs)


def defer(table: Any, site: Any, func: Callable, args: tuple, kwargs: dict, values: Any) -> torch.Tensor:
    """An empty placeholder for the head call `func(*args, **kwargs)` (its guard passed with `values`):
    the site's spare when nothing else holds it (module docstring), else a new one."""
    ph: Any = site.spare
    v = values[0]
    if ph is None or _refs(ph) != 3 or site.spare_device != v.get_device():  # 3: site.spare, `ph`, the argument
        ph = _new(site, v)
        if site.placeholder[3] and type(v) is torch.Tensor:  # (a placeholder's own reads are intercepted)
            site.spare, site.spare_device = ph, v.get_device()
    ph._kiln = Pending(site, table, func, args, kwargs, values)
    table.pending.append(weakref.ref(ph))  # one nobody holds any more needs no filling
    return ph


def _new(site: Any, v: Any) -> Any:
    shape, stride, dtype, like_first = site.placeholder
    if like_first and type(v) is torch.Tensor:  # its shape, stride and dtype (guarded): cheaper to build
        ph: Any = torch.empty_like(v)
    else:
        ph = torch.empty_strided(shape, stride, dtype=dtype, device=v.device if isinstance(v, torch.Tensor) else None)
    ph.__class__ = Placeholder
    return ph


def _release(ph: Any) -> Pending:
    p: Pending = ph._kiln
    del ph._kiln
    ph.__class__ = torch.Tensor
    if p.site.spare is ph:  # filled: a tensor someone reads, never a spare again
        p.site.spare = None
    _check(p)
    return p


def _check(p: Pending) -> None:
    if p.site.head_versions(p.values) != p.versions:
        _written(p)


def _unreachable() -> None:
    raise RuntimeError("kiln: a deferred head output was read after its scope let it go (only a weak reference "
                       "held it); unpatch this group")


def _written(p: Pending) -> None:
    raise RuntimeError(f"kiln: an input of {p.site.group}'s head was written in place before its "
                       "deferred result was read, so that result cannot be computed; unpatch this group")


def fill(ph: Any) -> None:
    """The head's real result into its placeholder (its own kernel when one is patched)."""
    p = _release(ph)
    with torch.no_grad(), torch._C.DisableTorchFunction():  # the head's op is not taken again
        nargs, nkw = sigs.normalize(p.func, p.args, p.kwargs) if p.kwargs else (p.args, p.kwargs)
        for site in p.table.single.get(p.func, ()):
            ok, out = p.table.run(site, nargs, nkw)
            if ok:
                ph.copy_(out)
                return
        ph.copy_(p.func(*p.args, **p.kwargs))


def fill_all(pending: list[weakref.ref]) -> None:
    """Fill the placeholders still alive (a scope's end: none may escape it empty); a site's spare that
    nothing else holds is not filled (nobody can read it), only let go of its head's arguments."""
    for ref in pending:
        ph = ref()
        if type(ph) is not Placeholder:
            continue
        p = ph._kiln
        if p is None:  # a spare already let go (listed twice: it was reused in this scope)
            continue
        if ph is p.site.spare and _refs(ph) == 3:  # 3: site.spare, `ph`, the argument
            ph._kiln = None
        else:
            fill(ph)
    pending.clear()


def tail(ph: Any, func: Callable, args: tuple, kwargs: dict = _NO_KW) -> tuple[bool, Any]:
    """(True, the fused kernel's result) when `func(*args, **kwargs)` (normalized) is the pair's tail
    on `ph`; else (False, None), `ph` still pending."""
    p: Pending = ph._kiln
    if p is None:
        _unreachable()
    site = p.site
    if func is not site.tail_func or p.spent:
        return False, None
    tguard = site.tail
    plain = not kwargs and not tguard.names and len(args) == tguard.n_pos  # already in the guard's order
    values = args if plain else tguard.values(args, kwargs)
    if values is None:
        return False, None
    for i in site.head_at:  # noqa: SIM110 - a loop, not any(genexpr): every fused call
        if values[i] is ph:
            break
    else:
        return False, None
    if not tguard.ok(values):
        return False, None
    if site.head_versions(p.values) != p.versions:  # `_check`, inlined
        _written(p)
    acts, params = site.fused_args(p.values, values)
    table, group = p.table, site.group
    table.calls[group] = table.calls.get(group, 0) + 1
    # `run`, not `__call__` (which asks torch.compiler first): a placeholder is made only in eager code;
    # were torch.compile to trace this, it would trace the same kernel's forward, not its custom op
    if table.ranges:
        with torch.profiler.record_function(f"kiln.group.{group}"):
            out = site.kernel.run(acts, params)
    else:
        out = site.kernel.run(acts, params)
    if site.tail_writes:  # relu_(bn(x)): the placeholder becomes the result, no copy
        _release(ph)
        ph.set_(out.untyped_storage(), out.storage_offset(), out.size(), out.stride())
        return True, ph
    p.spent = True  # `h = norm(x); y = act(h); h + y`: a later read of h still gets the head's result
    return True, out


def _placeholders(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The placeholders among a call's arguments (and in its tensor lists: `torch.cat([a, b])`)."""
    found: list[torch.Tensor] = []
    for v in (*args, *kwargs.values()):
        if type(v) is Placeholder:
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found += [t for t in v if type(t) is Placeholder]
    return found


def _metadata(func: Callable) -> bool:
    name = getattr(func, "__name__", "")
    if name == "__get__":
        return getattr(getattr(func, "__self__", None), "__name__", "") in META_PROPS
    return name in META_METHODS
