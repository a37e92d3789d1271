"""Degenerate reference problems: constant, near zero, input- or weight-independent."""

from __future__ import annotations

import torch
from torch import nn

from kiln.tools.integrity.degenerate import assess


def build(cls: type[nn.Module]):  # noqa: ANN201
    def make(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return cls()

    return make


def inputs(seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(16, 32, generator=g),)


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def reasons(cls: type[nn.Module]) -> list[str]:
    rec = assess(build(cls), inputs)
    assert rec.degenerate == bool(rec.reasons)
    return [r.split(":")[0] for r in rec.reasons]


def test_healthy_problem_is_not_degenerate() -> None:
    assert reasons(Linear) == []


def test_relu_of_negated_uniform_inputs_is_near_zero() -> None:
    class Dead(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(-x)  # inputs are in [0, 1): always zero

    assert "degenerate.near-zero" in reasons(Dead)


def test_constant_output() -> None:
    class Const(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x * 0, dim=1)  # uniform 1/32 everywhere

    assert "degenerate.constant" in reasons(Const)


def test_input_independent_output() -> None:
    class Weights(Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc.weight.sum(1) + 0 * x.sum()

    r = reasons(Weights)
    assert "degenerate.input-independent" in r and "degenerate.weight-independent" not in r


def test_weight_independent_output() -> None:
    class Norm(Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            return (y - y.mean()) / y.std() * 0 + x.mean(1, keepdim=True)

    r = reasons(Norm)
    assert "degenerate.weight-independent" in r and "degenerate.input-independent" not in r
