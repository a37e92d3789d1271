"""A problem whose init input is a shape tuple, as KernelBench's 40_LayerNorm passes
`normalized_shape`: the model adds a learned bias of that shape."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, shape, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(*shape))
        self.scale = scale

    def forward(self, x):
        return x * self.scale + self.bias


def get_inputs():
    return [torch.rand(4, 3, 5)]


def get_init_inputs():
    return [(3, 5), 2.0]
