"""Degenerate problems: references whose output a trivial candidate can reproduce.

Checked in the reference process, on the problem's own inputs (robust-kbench-style filters):
- `degenerate.constant`: every output element is the same value (within the comparison tolerance),
  so `torch.full(...)` passes;
- `degenerate.near-zero`: every output element is within the absolute tolerance of zero, so
  `torch.zeros(...)` passes;
- `degenerate.input-independent`: two different input draws give the same output;
- `degenerate.weight-independent`: two different weight draws (seeds) give the same output.

A degenerate problem is reported, not failed: speedups on it mean nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from kiln.tools import chunked
from kiln.tools.records import DegenerateRecord

ATOL = 1e-4
RTOL = 1e-4


def assess(build_model: Callable[[int], nn.Module], make_inputs: Callable[[int], tuple], *,
           atol: float = ATOL, rtol: float = RTOL) -> DegenerateRecord:
    """`build_model(seed)` builds the reference after seeding; `make_inputs(seed)` draws inputs."""
    model_a = build_model(0)
    x0, x1 = make_inputs(0), make_inputs(1)
    y00 = _run(model_a, x0)
    reasons = _value_reasons(y00, atol=atol, rtol=rtol)
    if _differs(x0, x1) and _same(y00, _run(model_a, x1), atol, rtol):
        reasons.append("degenerate.input-independent: two different input draws give the same output")
    model_b = build_model(1)
    if _differs(_params(model_a), _params(model_b)) and _same(y00, _run(model_b, x0), atol, rtol):
        reasons.append("degenerate.weight-independent: two different weight draws give the same output")
    return DegenerateRecord(degenerate=bool(reasons), reasons=reasons)


def _value_reasons(ys: list[torch.Tensor], *, atol: float, rtol: float) -> list[str]:
    n = sum(y.numel() for y in ys)
    if n == 0:
        return ["degenerate.constant: the output is empty"]
    first, peak, n_finite, constant = None, 0.0, 0, True
    for y in ys:
        for _, s in chunked.slices(y):
            finite = s[torch.isfinite(s)].double()
            if not finite.numel():
                continue
            n_finite += finite.numel()
            peak = max(peak, float(finite.abs().max()))
            first = finite[0] if first is None else first
            constant = constant and bool(((finite - first).abs() <= atol + rtol * first.abs()).all())
    if first is None:
        return ["degenerate.constant: no output element is finite"]
    if peak <= atol:
        return [f"degenerate.near-zero: max |output| = {peak:.3g} <= atol {atol:g}; zeros pass"]
    if constant and n_finite == n:
        return [f"degenerate.constant: every output element equals {float(first):.6g}"]
    return []


def _run(model: nn.Module, inputs: tuple) -> list[torch.Tensor]:
    """Copies of every tensor output (tuples and lists included), kept on the model's device."""
    with torch.no_grad():
        out = model(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    return [t.detach().clone() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _same(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    return len(a) == len(b) and all(chunked.allclose(x, y, atol=atol, rtol=rtol) for x, y in zip(a, b, strict=True))


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach() for p in model.parameters()]


def _differs(a: object, b: object) -> bool:
    ta = [t for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor)]
    tb = [t for t in tree_flatten(b)[0] if isinstance(t, torch.Tensor)]
    if not ta or len(ta) != len(tb):
        return bool(ta or tb) and len(ta) != len(tb)
    return any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(ta, tb, strict=True))
