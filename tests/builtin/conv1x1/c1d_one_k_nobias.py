# A 1-D 1x1 conv without bias, batch 1: 64 input channels (all of K in one tile), 40 output
# channels (less than a tile, not a power of two), 1023 positions.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, 1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 64, 1023)]


def get_init_inputs():
    return [64, 40]
