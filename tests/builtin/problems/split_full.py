"""Split-reduction coverage: few tiles, long reduced extent (split_full)."""

import torch
import torch.nn as nn

dim0 = 64
dim1 = 200


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * x).sum() * 0.5


def get_inputs():
    return [torch.randn(dim0, dim1)]


def get_init_inputs():
    return []
