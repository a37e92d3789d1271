# 1x1 convs this path leaves to the implicit-GEMM template: stride 2, then padding 1 and 2 groups.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(16, 32, 1, stride=2)
        self.grouped = nn.Conv2d(32, 24, 1, padding=1, groups=2)

    def forward(self, x):
        return self.grouped(self.down(x))


def get_inputs():
    return [torch.randn(2, 16, 9, 11)]


def get_init_inputs():
    return []
