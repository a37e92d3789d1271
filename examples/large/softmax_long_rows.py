"""Large size for the H200 benchmark (2048 x 131072 fp32, 1 GiB). Softmax over rows too long for
one tile, as KernelBench's 23_Softmax (4096 x 393216): the looped kernel, max and sum of exp in
one pass (online softmax)."""

import torch
import torch.nn as nn

batch_size = 2048
dim = 131072


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
