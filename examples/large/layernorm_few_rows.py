"""Large size for the H200 benchmark (16 x 64 x 256 x 256 fp32, 256 MiB). LayerNorm over the last
three dims, as KernelBench's 40_LayerNorm: 16 rows of 4 Mi elements, too few rows to fill the GPU,
so every reduction level is split along the row."""

import torch
import torch.nn as nn

batch_size = 16
normalized_shape = (64, 256, 256)


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, *normalized_shape)]


def get_init_inputs():
    return [normalized_shape]
