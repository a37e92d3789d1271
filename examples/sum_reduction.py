"""Sum over a middle dim (KernelBench 47 style): (batch, dim1, dim2) -> (batch, 1, dim2)."""

import torch
import torch.nn as nn

batch_size = 8
dim1 = 200
dim2 = 160
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
