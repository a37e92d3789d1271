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


def _value_reasons(y: torch.Tensor, *, atol: float, rtol: float) -> list[str]:
    if y.numel() == 0:
        return ["degenerate.constant: the output is empty"]
    finite = y[torch.isfinite(y)]
    if finite.numel() == 0:
        return ["degenerate.constant: no output element is finite"]
    peak = float(finite.abs().max())
    if peak <= atol:
        return [f"degenerate.near-zero: max |output| = {peak:.3g} <= atol {atol:g}; zeros pass"]
    first = finite.flatten()[0]
    if bool(((finite - first).abs() <= atol + rtol * first.abs()).all()) and finite.numel() == y.numel():
        return [f"degenerate.constant: every output element equals {float(first):.6g}"]
    return []


def _run(model: nn.Module, inputs: tuple) -> torch.Tensor:
    """All tensor outputs flattened into one float vector (tuples and lists included)."""
    with torch.no_grad():
        out = model(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    parts = [t.detach().reshape(-1).double().cpu() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _same(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach() for p in model.parameters()]


def _differs(a: object, b: object) -> bool:
    ta = [t for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor)]
    tb = [t for t in tree_flatten(b)[0] if isinstance(t, torch.Tensor)]
    if not ta or len(ta) != len(tb):
        return bool(ta or tb) and len(ta) != len(tb)
    return any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(ta, tb, strict=True))
