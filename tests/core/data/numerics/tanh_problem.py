"""tanh(x) on KernelBench-style torch.rand inputs."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def get_inputs():
    return [torch.rand(33, 129)]


def get_init_inputs():
    return []
