"""Large size for the H200 benchmark: GroupNorm(32, 320) + SiLU over a (2, 320, 64, 64) activation,
a Stable Diffusion UNet ResBlock's norm (64 rows of 40960 elements: the split path)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(32, 320, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


def get_inputs():
    return [torch.randn(2, 320, 64, 64)]


def get_init_inputs():
    return []
