"""KernelBench level1 23_Softmax's shape of trouble, scaled down: rows of 40000, every output
~2.5e-5, below atol 1e-4 on the problem's own inputs (near-zero)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(4, 40000)]


def get_init_inputs():
    return []
