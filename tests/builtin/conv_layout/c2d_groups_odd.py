# Per-tap path (CIG >= 16) with the channels innermost: groups, stride, padding, dilation, a channel
# count that is not a multiple of the K tile (CIG 20), bias and a residual epilogue.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(40, 24, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2, bias=True)

    def forward(self, x, r):
        return torch.relu(self.conv(x) + r)


def get_inputs():
    return [torch.randn(2, 40, 9, 11), torch.randn(2, 24, 5, 7)]


def get_init_inputs():
    return []
