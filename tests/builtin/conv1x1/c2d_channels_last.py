# A 2-D 1x1 conv (dilation 2, which a 1x1 kernel never uses) of a channels-last input: positions are
# then CIN apart and the channels contiguous, read in place; 130 output channels (two blocks).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, dilation=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(3, 24, 17, 19).to(memory_format=torch.channels_last)]


def get_init_inputs():
    return [24, 130]
