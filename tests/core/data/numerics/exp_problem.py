"""exp(x): finite on KernelBench's inputs, overflows on x1000 ones (that distribution is dropped)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


def get_inputs():
    return [torch.rand(33, 129)]


def get_init_inputs():
    return []
