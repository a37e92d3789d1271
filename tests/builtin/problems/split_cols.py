"""Split-reduction coverage: few tiles, long reduced extent (split_cols)."""

import torch
import torch.nn as nn

dim0 = 5000
dim1 = 7


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.amax(x, dim=0) + 1.0


def get_inputs():
    return [torch.randn(dim0, dim1)]


def get_init_inputs():
    return []
