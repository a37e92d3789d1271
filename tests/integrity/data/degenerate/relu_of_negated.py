"""Degenerate on its own inputs: relu(-x) of torch.rand inputs is all zeros (near-zero)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(-x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
