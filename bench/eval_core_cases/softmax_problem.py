"""Benchmark problem (KernelBench format): softmax over the last dim of a 16384 x 4096 fp32 matrix.
Eager takes ~0.21 ms on an H200, so timing repeatability is measured on a kernel well above 50 us."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 16384
dim = 4096


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
