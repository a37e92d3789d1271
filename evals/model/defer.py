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
more and it is freed unread; a later reader (the head's output had another consumer) gets it filled.
The patched scope that holds the pair fills the placeholders still alive when its forward ends (they
are tracked by weak reference), so none escapes empty. A head input written in place before the
placeholder is read is detected (tensor versions) and raised: the head's result cannot be recomputed
then.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from kiln.evals.model import sigs

META_PROPS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "is_sparse"}
META_METHODS = {"size", "dim", "stride", "numel", "is_contiguous", "element_size", "nelement", "ndimension",
                "get_device", "is_floating_point"}


_NO_KW: dict = {}


class Pending:
    """A deferred head call, kept on its placeholder until the placeholder is read."""

    __slots__ = ("site", "table", "func", "args", "kwargs", "values", "versions", "spent")

    def __init__(self, site: Any, table: Any, func: Callable, args: tuple, kwargs: dict, values: Any) -> None:
        self.site, self.table, self.func, self.args, self.kwargs, self.values = site, table, func, args, kwargs, values
        self.versions = site.head_versions(values)  # the head's tensors' versions, checked again when read
        self.spent = False  # the fused tail ran: the placeholder is filled only if it is read again


class Placeholder(torch.Tensor):
    """A deferred head's output (never built directly: `defer` swaps an empty tensor's class)."""

    _kiln: Pending

    @classmethod
    def __torch_function__(cls, func: Callable, types_: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            if _metadata(func):  # no data read: the placeholder can wait
                return func(*args, **kwargs)
            found = _placeholders(args, kwargs)
            if len(found) == 1:
                done, out = tail(found[0], func, *sigs.normalize(func, args, kwargs))
                if done:
                    return out
            for ph in found:
                fill(ph)
            return func(*args, **kwargs)


def defer(table: Any, site: Any, func: Callable, args: tuple, kwargs: dict, values: Any) -> torch.Tensor:
    """An empty placeholder for the head call `func(*args, **kwargs)` (its guard passed with `values`)."""
    shape, stride, dtype, like_first = site.placeholder
    v = values[0]
    if like_first and type(v) is torch.Tensor:  # its shape, stride and dtype (guarded): cheaper to build
        ph: Any = torch.empty_like(v)
    else:
        ph = torch.empty_strided(shape, stride, dtype=dtype, device=v.device if isinstance(v, torch.Tensor) else None)
    ph._kiln = Pending(site, table, func, args, kwargs, values)
    ph.__class__ = Placeholder
    table.pending.append(weakref.ref(ph))  # one nobody holds any more needs no filling
    return ph


def _release(ph: Any) -> Pending:
    p: Pending = ph._kiln
    del ph._kiln
    ph.__class__ = torch.Tensor
    _check(p)
    return p


def _check(p: Pending) -> None:
    if p.site.head_versions(p.values) != p.versions:
        _written(p)


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
    """Fill the placeholders still alive (a scope's end: none may escape it empty)."""
    for ref in pending:
        ph = ref()
        if type(ph) is Placeholder:
            fill(ph)
    pending.clear()


def tail(ph: Any, func: Callable, args: tuple, kwargs: dict = _NO_KW) -> tuple[bool, Any]:
    """(True, the fused kernel's result) when `func(*args, **kwargs)` (normalized) is the pair's tail
    on `ph`; else (False, None), `ph` still pending."""
    p: Pending = ph._kiln
    site = p.site
    if func is not site.tail_func or p.spent:
        return False, None
    values = site.tail.match(args, kwargs)
    if values is None:
        return False, None
    for i in site.head_at:  # noqa: SIM110 - a loop, not any(genexpr): every fused call
        if values[i] is ph:
            break
    else:
        return False, None
    if site.head_versions(p.values) != p.versions:  # `_check`, inlined
        _written(p)
    acts, params = site.fused_args(p.values, values)
    table, group = p.table, site.group
    table.calls[group] = table.calls.get(group, 0) + 1
    if table.ranges:
        with torch.profiler.record_function(f"kiln.group.{group}"):
            out = site.kernel(acts, params)
    else:
        out = site.kernel(acts, params)
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
