"""Large size for the H200 benchmark: sum over dim 0 of a (16384, 4096) tensor (a split reduction: few output tiles)."""

import torch
import torch.nn as nn

batch_size = 16384
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=0)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
