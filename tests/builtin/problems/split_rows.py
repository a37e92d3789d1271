"""Split-reduction coverage: few tiles, long reduced extent (split_rows)."""

import torch
import torch.nn as nn

dim0 = 3
dim1 = 9000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=-1)


def get_inputs():
    return [torch.randn(dim0, dim1)]


def get_init_inputs():
    return []
