"""y = 2x + 1 over an irregular length (KernelBench format): memory-bound elementwise."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(50_000_017)]


def get_init_inputs():
    return []
