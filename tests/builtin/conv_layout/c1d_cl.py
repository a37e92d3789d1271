# A 1-D conv whose K is 48 input channels a tap (per-tap path), stride 2, dilation 3.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(48, 32, 3, stride=2, dilation=3, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(3, 48, 37)]


def get_init_inputs():
    return []
