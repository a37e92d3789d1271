# A 3-D conv with 16 input channels (per-tap path since channels lie innermost) and padding.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(16, 8, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 16, 4, 5, 6)]


def get_init_inputs():
    return []
