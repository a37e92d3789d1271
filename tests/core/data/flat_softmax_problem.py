"""A softmax over rows so long that every output (~1/65536) lies below the fp32 atol of 1e-4,
the trap of KernelBench's 23_Softmax (rows of 393216)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.rand(2, 65536)]


def get_init_inputs():
    return []
