import torch
import torch.nn as nn


class Model(nn.Module):
    """Score every row of x (N x D) against every code of a learned codebook (C x D): the dot
    products, scaled per code, and only the positive part kept."""

    def __init__(self, n_codes: int, dim: int):
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(n_codes, dim) / dim**0.5)
        self.gain = nn.Parameter(torch.rand(n_codes) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(torch.einsum("nd,cd->nc", x, self.codebook) * self.gain, min=0.0)


n = 70
n_codes = 45
dim = 100


def get_inputs():
    return [torch.randn(n, dim)]


def get_init_inputs():
    return [n_codes, dim]
