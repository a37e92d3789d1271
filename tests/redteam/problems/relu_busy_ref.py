"""ReLU on 37 x 129 fp32 whose reference also spends ~40 ms of CPU on each call (a result it then
multiplies by zero): a reference with work to do, for a candidate that tries to starve it."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.ones(64, 64)
        for _ in range(400):
            a = (a @ a) * 0.01
        return torch.relu(x) + a[0, 0] * 0


def get_inputs():
    return [torch.rand(37, 129)]


def get_init_inputs():
    return []
