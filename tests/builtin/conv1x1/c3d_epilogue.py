# A 3-D 1x1 conv with bias, then a per-channel scale, a full-shape residual and relu fused into its
# epilogue (the "chan" and "bcast" roles: the residual is read per (d, h, w)); 20 input channels
# (a K tail inside the one tile), 5 x 7 x 9 positions, batch 3.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 1)
        self.scale = nn.Parameter(torch.randn(cout, 1, 1, 1))

    def forward(self, x, r):
        return torch.relu(self.conv(x) * self.scale + r)


def get_inputs():
    return [torch.randn(3, 20, 5, 7, 9), torch.randn(3, 24, 5, 7, 9)]


def get_init_inputs():
    return [20, 24]
