"""The patch guard, compiled once per signature: does a live call match a kernel's recorded call?

A signature is turned into a few tuples at apply time (the call's form, each tensor's shape, dtype,
stride and device, each plain value's source), so a call inside a patched scope costs a handful of
comparisons, not a walk over pydantic records. The test is the same as `sigs.signature_matches`:
equal shapes, dtypes, strides and device types, equal values (compared by their Python source, so
`1` and `True` or `1.0` and `1` never pass for each other), and no tensor that needs autograd. A
plain value that passed is remembered by identity when it is immutable (a module's `eps` is the same
float object every call), so it passes again with no lookup; the tensors of the last call that
passed are checked again in one C call (`FastCheck`), the full check only when that fails.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from kiln.evals.model import sigs
from kiln.evals.model.records import CallSig

_SRC: dict[tuple[type, Any], str] = {}
_UNSEEN: Any = object()

try:
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:  # pragma: no cover - every torch kiln supports has it; the full check then
    _TensorGuards = None


def _src(v: Any) -> str | None:
    """value_src(v), memoised for hashable plain values (the common case: ints, floats, None)."""
    try:
        key = (type(v), v)
        hit = _SRC.get(key)
    except TypeError:
        key, hit = None, None
    if hit is not None:
        return hit
    try:
        out = sigs.value_src(v)
    except sigs.NotWritable:
        return None
    if key is not None and len(_SRC) < 4096:
        _SRC[key] = out
    return out


def _immutable(v: Any) -> bool:
    """Whether `v` can never change (so the same object always has the same source)."""
    if isinstance(v, tuple):
        return all(_immutable(x) for x in v)
    return v is None or isinstance(v, bool | int | float | str | torch.dtype | torch.memory_format)


class Guard:
    """One signature's matcher. `values(args, kwargs)` puts a call's arguments in the signature's
    order (None when the call is written another way); `ok(values)` checks them."""

    def __init__(self, sig: CallSig, skip_head: bool = False) -> None:
        self.n_pos = sum(1 for a in sig.args if not a.name)
        self.names = [a.name for a in sig.args if a.name]
        self.sorted_names = sorted(self.names)
        self.tensors: list[tuple[int, tuple, torch.dtype, tuple, bool]] = []
        self.plain: list[tuple[int, str, Any]] = []  # (position, source, the last immutable value that passed)
        for i, a in enumerate(sig.args):
            if skip_head and a.param == sigs.HEAD_MARK:
                continue
            if a.kind == "value":
                self.plain.append((i, a.src, _UNSEEN))
            else:
                t = a.tensor
                assert t is not None
                if t.device not in ("cpu", "cuda"):
                    raise ValueError(f"kernels for {t.device} tensors are not supported (cpu and cuda are)")
                self.tensors.append((i, tuple(t.shape), getattr(torch, t.dtype), tuple(t.stride), t.device == "cuda"))
        self.acts = [i for i, a in enumerate(sig.args) if a.kind == "tensor" and a.param != sigs.HEAD_MARK]
        self.params = [i for i, a in enumerate(sig.args) if a.kind == "param"]
        self._acts, self._params = picker(self.acts), picker(self.params)
        self._tensors = picker([t[0] for t in self.tensors])
        self.fast = FastCheck()

    def values(self, args: tuple, kwargs: dict) -> tuple | list[Any] | None:
        if len(args) != self.n_pos:
            return None
        if not kwargs:
            return args if not self.names else None
        if len(kwargs) != len(self.names) or sorted(kwargs) != self.sorted_names:
            return None
        return [*args, *[kwargs[k] for k in self.names]]

    def ok(self, values: tuple | list[Any], fast: bool = True) -> bool:
        """Whether `values` match; `fast=False` (under torch.compile) keeps to the full check, which
        the compiler can trace (its C fast check would break the graph)."""
        if self.tensors:
            f = self.fast  # FastCheck.check, inlined: this runs on every patched call
            if not fast or f.guard is None or not f.guard.check(*self._tensors(values)) \
                    or (f.grad and torch.is_grad_enabled()):
                if not self._tensors_ok(values):
                    return False
                if fast:
                    f.learn(self._tensors(values))
        for i, src, seen in self.plain:  # a loop, not all(genexpr): every patched call
            v = values[i]
            if v is not seen and not self._plain_ok(i, src, v):
                return False
        return True

    def _plain_ok(self, i: int, src: str, v: Any) -> bool:
        """A plain value not seen before: its source compared; remembered when it is immutable."""
        if _src(v) != src:
            return False
        if _immutable(v):
            self.plain = [(j, s, v if j == i else seen) for j, s, seen in self.plain]
        return True

    def _tensors_ok(self, values: tuple | list[Any]) -> bool:
        grad = torch.is_grad_enabled()
        for i, shape, dtype, stride, cuda in self.tensors:
            v = values[i]  # `is_cuda`, not `device.type`: the latter builds a device object (3 us)
            if not isinstance(v, torch.Tensor) or v.dtype is not dtype or v.shape != shape \
                    or v.stride() != stride or v.is_cuda is not cuda or (grad and v.requires_grad):
                return False
        return True

    def match(self, args: tuple, kwargs: dict, fast: bool = True) -> tuple | list[Any] | None:
        """`values(args, kwargs)` when they pass `ok`, else None."""
        if kwargs or self.names:
            values = self.values(args, kwargs)
            return values if values is not None and self.ok(values, fast) else None
        return args if len(args) == self.n_pos and self.ok(args, fast) else None

    def split(self, values: tuple | list[Any]) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """(the kernel's activations, the module's parameters), in the problem's order."""
        return self._acts(values), self._params(values)


class FastCheck:
    """The tensors of the last call that passed a guard's full check, checked again in one C call
    (`Guard.ok` makes it, inlined: it runs on every patched call): torch's own tensor guard
    (`torch._C._dynamo.guards.TensorGuards`, what torch.compile's guards use) checks each tensor's
    Python type, dispatch keys (so its device type), dtype, device index, requires_grad, sizes and
    strides against them, and that no tensor is passed twice. A call that passes it passes
    the full check too (the grad rule aside, kept here: with grad enabled, a pattern with a tensor
    that requires grad never passes); one that fails it takes the full check, and one that passes that
    becomes the pattern (at most `MAX_LEARN` times a guard: alternating patterns keep the full check).
    A torch without the guard, or whose guard differs, keeps the full check always."""

    MAX_LEARN = 4

    def __init__(self) -> None:
        self.guard: Any = None
        self.grad = False  # whether the pattern has a tensor that requires grad
        self.learned = 0

    def learn(self, tensors: tuple) -> None:
        if _TensorGuards is None or self.learned >= self.MAX_LEARN:
            return
        self.learned += 1
        try:
            g = _TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)
            if g.check(*tensors) is not True:  # e.g. one tensor passed twice: no pattern for this call
                return
        except Exception:  # noqa: BLE001 - a torch whose guard takes other arguments: the full check only
            return
        self.guard, self.grad = g, any(t.requires_grad for t in tensors)


def compiled(name: str, params: str, lines: list[str]) -> Callable:
    """`def name(params):` with these body lines, compiled once (a site's or a call layout's checks as
    straight-line code: one frame, no loop, no `map`, which on this path cost more than they save).
    The source is built by kiln from integers and identifiers only, never from a bundle's text."""
    scope: dict[str, Any] = {}
    body = "".join(f"\n    {line}" for line in lines)
    exec(f"def {name}({params}):{body}", scope)  # noqa: S102 - see the docstring
    return scope[name]


def versions(at: list[int]) -> Callable[[Any], tuple]:
    """`values -> tuple(values[i]._version for i in at)` as one expression, compiled once per site
    (`tuple(map(attrgetter))` costs twice as many instructions; every deferred head reads them twice)."""
    return compiled("head_versions", "v", [f"return ({''.join(f'v[{int(i)}]._version, ' for i in at)})"])


def picker(at: list[int]) -> Callable[[Any], tuple]:
    """`values -> tuple(values[i] for i in at)`, as one C call where it can be."""
    if len(at) > 1:
        return operator.itemgetter(*at)
    if at:
        i = at[0]
        return lambda values: (values[i],)
    return lambda values: ()
