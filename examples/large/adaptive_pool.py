"""Large size for the H200 benchmark: ResNet-50's global average pool, (32, 2048, 7, 7) -> (32, 2048, 1, 1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(32, 2048, 7, 7)]


def get_init_inputs():
    return []
