"""Python numbers as forward inputs, beside a broadcast tensor: an int (1, which Triton would turn
into a constant if passed as an int) and a float."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, k, b, s):
        return torch.relu(a * s + b) * k


def get_inputs():
    return [torch.randn(7, 33), 1, torch.randn(33), -2.5]


def get_init_inputs():
    return []
