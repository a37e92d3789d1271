"""ReLU on 8192 x 8192 fp32 (GPU red-team tests): memory-bound, ~0.13 ms on an H200, near its
physics floor, so a side stream that hides the work reads tens of times too fast."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(8192, 8192)]


def get_init_inputs():
    return []
