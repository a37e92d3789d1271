"""A small CNN for `kiln model` on a CPU: conv, group norm, SiLU, adaptive average pooling, a linear head.

    kiln model examples/model/small_cnn.py:make --device cpu
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.norm = nn.GroupNorm(4, ch)
        self.act = nn.SiLU()

    def forward(self, x):
        return x + self.act(self.norm(self.conv(x)))


class SmallCNN(nn.Module):
    def __init__(self, ch: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, padding=1)
        self.blocks = nn.Sequential(Block(ch), Block(ch))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(ch, classes)

    def forward(self, x):
        x = F.silu(self.stem(x))
        x = self.blocks(x)
        return self.head(torch.flatten(self.pool(x), 1))


def make():
    torch.manual_seed(0)
    return SmallCNN(), (torch.randn(2, 3, 16, 16),)
