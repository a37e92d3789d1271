"""LayerNorm over the last three dims, sized like KernelBench level 1's 40_LayerNorm (a 67M-element
input: fine on a GPU, days of checking under Triton's interpreter on a CPU). The --shrink tests' problem."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, shape: tuple):
        super().__init__()
        self.norm = nn.LayerNorm(normalized_shape=shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256
kernel_hint = 3  # not read by get_inputs(): never shrunk


def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [(features, dim1, dim2)]
