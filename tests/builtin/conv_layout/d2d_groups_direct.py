# Few input channels a group (5): the direct FMA loop, with groups, stride, padding, dilation and a
# bias and ReLU epilogue.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(10, 12, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2, bias=True)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 10, 11, 9)]


def get_init_inputs():
    return []
