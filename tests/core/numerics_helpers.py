"""Helpers for the numerics-tolerance tests: a reference pack made as the reference worker makes
it (native output, then the high-precision and magnitude runs), and a judgement of a candidate."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kiln.tools import numerics
from kiln.tools.correctness import pack
from kiln.tools.tolerance import Judgement, judge

SEED = 20261201


def reference_pack(model: nn.Module, inputs: tuple, *, dtype: str = "fp32", seed: int = SEED) -> dict[str, Any]:
    num = numerics.build(model, dtype)
    assert isinstance(num, numerics.Numerics), num
    with torch.no_grad():
        out = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    packed = pack(out, seed)
    packed["numerics"] = numerics.numerics_pack(num, inputs, packed, seed=seed)
    return packed


def judged(model: nn.Module, inputs: tuple, candidate_output: Any, *, dtype: str = "fp32",
           numerics_rule: bool = True) -> Judgement:
    from kiln.tools.correctness import tolerances

    atol, rtol = tolerances(dtype, None, None)
    return judge(reference_pack(model, inputs, dtype=dtype), pack(candidate_output, SEED), dtype=dtype, atol=atol,
                 rtol=rtol, numerics=numerics_rule)


class Reduce(nn.Module):
    def __init__(self, op: str, dim: int = -1) -> None:
        super().__init__()
        self.op, self.dim = op, dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(torch, self.op)(x, dim=self.dim)


class LayerNorm(nn.Module):
    def __init__(self, w: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(w.clone()), nn.Parameter(b.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)


class Linear(nn.Module):
    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(w.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.t()


def model_for(op: str, inputs: tuple) -> tuple[nn.Module, tuple]:
    """(reference model, its inputs) for a job of data/numerics/run.py."""
    if op == "layer_norm":
        x, w, b = inputs
        return LayerNorm(w, b), (x,)
    if op == "softmax":
        return Reduce("softmax"), inputs
    return Reduce({"row_sum": "sum", "row_mean": "mean"}[op]), inputs
