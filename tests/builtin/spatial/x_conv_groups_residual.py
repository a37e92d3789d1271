# A grouped (not depthwise) conv with bias, padding and dilation, then a residual of a same-shape
# input and a per-channel scale: the conv epilogue's "bcast" and "chan" roles.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=2, dilation=2, groups=groups, bias=True)
        self.scale = nn.Parameter(torch.randn(cout, 1, 1))

    def forward(self, x, r):
        return torch.relu(self.conv(x) * self.scale + r)


def get_inputs():
    return [torch.randn(2, 4, 5, 7), torch.randn(2, 6, 5, 7)]


def get_init_inputs():
    return [4, 6, 2]
