"""ReLU on 37 x 129 fp32: small enough that one check under Triton's interpreter takes seconds. The
red-team candidates attack kiln, not the kernel, so the problem is the simplest one with a hidden
distribution (x -1) that an identity kernel fails."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(37, 129)]


def get_init_inputs():
    return []
