"""Large size for the H200 benchmark (16384 x 4096 fp32). An elementwise chain with a broadcast bias: GELU(x * scale + bias) then a clamp."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
features = 4096


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(x * 1.5 + self.bias)
        return torch.clamp(y, min=-0.5, max=2.0)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
