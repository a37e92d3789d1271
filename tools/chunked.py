"""Whole-tensor reductions in slices, so a check never holds a float64 copy of a multi-GB tensor.

KernelBench's level-1 tensors reach 6-8 GB (4096x393216 fp32). `t.double()` on one of those asks
for another 12-15 GB, `a == b` for a 1.6 GB mask, and a check runs a few of them side by side in
two processes on one GPU. Each function here walks the flattened tensors `CHUNK` elements at a
time, in float64 where it sums or compares values, and holds at most a few slices at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

CHUNK = 1 << 24  # 16 Mi elements: a 128 MB float64 slice


def slices(t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    """(offset, slice) pairs covering the flattened tensor."""
    f = t.detach().reshape(-1)
    for s in range(0, f.numel(), CHUNK):
        yield s, f[s:s + CHUNK]


def pairs(a: torch.Tensor, b: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Aligned slices of two same-shape tensors, flattened."""
    for (_, x), (_, y) in zip(slices(a), slices(b), strict=True):
        yield x, y


def sum64(t: torch.Tensor) -> float:
    """Sum in float64 with NaN read as 0 (a digest that two processes reproduce exactly)."""
    return float(sum(float(s.double().nan_to_num(0.0).sum()) for _, s in slices(t)))


def finite_stats(t: torch.Tensor) -> dict[str, float | int]:
    """Whole-tensor counts of NaN, +inf and -inf, and the sum of |x| over finite elements (summed in
    float64 across slices).

    A floating slice takes one fused reduction first (the L1 norm: one read, no temporaries): a finite
    norm means no NaN or inf in the slice, and is its sum of |x|. Only a slice whose norm is not
    finite (a NaN or inf in it, or |x| summing past the dtype's range) is counted element by element,
    in five passes and a temporary of its size. Sketching a 256 MB output cost 6 ms a trial on the
    exact path alone (H200)."""
    nan = posinf = neginf = 0
    sum_abs = 0.0
    for _, s in slices(t):
        if s.is_floating_point() and s.numel():
            acc = _norm_dtype(s)
            norm = float(torch.linalg.vector_norm(s, 1, dtype=acc))
            if math.isfinite(norm):
                sum_abs += norm
                continue
        f = s if s.is_floating_point() else s.double()
        nan += int(torch.isnan(f).sum())
        posinf += int((f == float("inf")).sum())
        neginf += int((f == float("-inf")).sum())
        sum_abs += float(torch.where(torch.isfinite(f), f, 0.0).abs().sum(dtype=torch.float64))
    return {"nan": nan, "posinf": posinf, "neginf": neginf, "sum_abs": sum_abs}


def _norm_dtype(s: torch.Tensor) -> torch.dtype | None:
    """What the L1 norm accumulates in: the CPU's reduction sums float32 nearly in order (0.5% off at
    16 Mi elements), so float64 there; a GPU's tree reduction in float32 is ~1e-6 off."""
    if s.device.type == "cpu":
        return torch.float64
    return torch.float32 if s.dtype in (torch.float16, torch.bfloat16) else None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal (so NaN equals NaN): same shape, dtype and bytes."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ba, bb = (t.detach().contiguous().reshape(-1).view(torch.uint8) if t.numel() else t for t in (a, b))
    return all(torch.equal(x, y) for x, y in pairs(ba, bb))


def allclose(a: torch.Tensor, b: torch.Tensor, *, atol: float, rtol: float) -> bool:
    """`torch.allclose(a.double(), b.double(), equal_nan=True)` without the whole-tensor copies."""
    if a.shape != b.shape:
        return False
    return all(torch.allclose(x.double(), y.double(), atol=atol, rtol=rtol, equal_nan=True)
               for x, y in pairs(a, b))


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest |a - b| over elements that are not NaN in both; inf when the NaN patterns differ."""
    worst = 0.0
    for x, y in pairs(a, b):
        nx, ny = torch.isnan(x), torch.isnan(y)
        if not torch.equal(nx, ny):
            return float("inf")
        d = (x.double() - y.double()).abs().masked_fill_(nx, 0.0)
        if d.numel():
            worst = max(worst, float(torch.nan_to_num(d, nan=float("inf")).max()))
    return worst


def moved(base: torch.Tensor, out: torch.Tensor, tol: float, slack: float) -> bool:
    """Does `out` differ from `base` anywhere by more than tol + tol*|base| + slack (NaN where the
    other is not counts as a difference)?"""
    for b, o in pairs(base, out):
        nb, no = torch.isnan(b), torch.isnan(o)
        if not torch.equal(nb, no):
            return True
        bd = b.double()
        if bool(((bd - o.double()).abs().masked_fill_(nb, 0.0) > tol + tol * bd.abs() + slack).any()):
            return True
    return False


def digest(t: torch.Tensor) -> int:
    """A position-weighted checksum of the raw bits (int64 arithmetic, wrapping): any change of any
    element changes it, barring a collision. Used to see whether a tensor changed since a moment
    without keeping a copy of it."""
    if t.numel() == 0:
        return 0
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    bits = t.detach().contiguous().reshape(-1).view(ints)
    total = 0
    for off, s in slices(bits):
        w = torch.arange(off + 1, off + 1 + s.numel(), device=s.device, dtype=torch.int64) % 65521 + 1
        total = (total + int((s.to(torch.int64) * w).sum())) & 0xFFFFFFFFFFFFFFFF
    return total
