"""ReLU then scale: y = 2 * relu(x) on 37 x 129 (odd sizes, CPU-fast). The graph tests' problem."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2.0 * torch.relu(x)


rows = 37
cols = 129


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
