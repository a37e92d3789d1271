# A 3-channel 1-D conv, strided and padded: the direct FMA loop with 20 output channels (a partial
# channel tile).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 20, 7, stride=3, padding=3, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 3, 50)]


def get_init_inputs():
    return []
