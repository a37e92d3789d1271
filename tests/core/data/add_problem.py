"""Tiny KernelBench-format problem for the check pipeline's own tests: x + y over 1023 elements."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.rand(1023), torch.rand(1023)]


def get_init_inputs():
    return []
