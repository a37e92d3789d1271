"""The patch guard, compiled once per signature: does a live call match a kernel's recorded call?

A signature is turned into a few tuples at apply time (the call's form, each tensor's shape, dtype,
stride and device, each plain value's source), so a call inside a patched scope costs a handful of
comparisons, not a walk over pydantic records. The test is the same as `sigs.signature_matches`:
equal shapes, dtypes, strides and device types, equal values (compared by their Python source, so
`1` and `True` or `1.0` and `1` never pass for each other), and no tensor that needs autograd.
"""

from __future__ import annotations

from typing import Any

import torch

from kiln.evals.model import sigs
from kiln.evals.model.records import CallSig

_SRC: dict[tuple[type, Any], str] = {}


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


class Guard:
    """One signature's matcher. `values(args, kwargs)` puts a call's arguments in the signature's
    order (None when the call is written another way); `ok(values)` checks them."""

    def __init__(self, sig: CallSig, skip_head: bool = False) -> None:
        self.n_pos = sum(1 for a in sig.args if not a.name)
        self.names = [a.name for a in sig.args if a.name]
        self.sorted_names = sorted(self.names)
        self.tensors: list[tuple[int, tuple, torch.dtype, tuple, bool]] = []
        self.plain: list[tuple[int, str]] = []
        for i, a in enumerate(sig.args):
            if skip_head and a.param == sigs.HEAD_MARK:
                continue
            if a.kind == "value":
                self.plain.append((i, a.src))
            else:
                t = a.tensor
                assert t is not None
                if t.device not in ("cpu", "cuda"):
                    raise ValueError(f"kernels for {t.device} tensors are not supported (cpu and cuda are)")
                self.tensors.append((i, tuple(t.shape), getattr(torch, t.dtype), tuple(t.stride), t.device == "cuda"))
        self.acts = [i for i, a in enumerate(sig.args) if a.kind == "tensor" and a.param != sigs.HEAD_MARK]
        self.params = [i for i, a in enumerate(sig.args) if a.kind == "param"]

    def values(self, args: tuple, kwargs: dict) -> list[Any] | None:
        if len(args) != self.n_pos:
            return None
        if not kwargs:
            return list(args) if not self.names else None
        if len(kwargs) != len(self.names) or sorted(kwargs) != self.sorted_names:
            return None
        return [*args, *[kwargs[k] for k in self.names]]

    def ok(self, values: list[Any]) -> bool:
        grad = torch.is_grad_enabled()
        for i, shape, dtype, stride, cuda in self.tensors:
            v = values[i]  # `is_cuda`, not `device.type`: the latter builds a device object (3 us)
            if not isinstance(v, torch.Tensor) or v.dtype is not dtype or v.shape != shape \
                    or v.stride() != stride or v.is_cuda is not cuda or (grad and v.requires_grad):
                return False
        for i, src in self.plain:  # noqa: SIM110 - a loop, not all(genexpr): this runs every patched call
            if _src(values[i]) != src:
                return False
        return True

    def match(self, args: tuple, kwargs: dict) -> list[Any] | None:
        """`values(args, kwargs)` when they pass `ok`, else None."""
        values = self.values(args, kwargs)
        return values if values is not None and self.ok(values) else None

    def split(self, values: list[Any]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(the kernel's activations, the module's parameters), in the problem's order."""
        return [values[i] for i in self.acts], [values[i] for i in self.params]
