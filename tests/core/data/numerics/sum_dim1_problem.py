"""Issue 16's row sum: a 16 x 300 x 40 tensor summed over dim 1."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(16, 300, 40)]


def get_init_inputs():
    return [1]
