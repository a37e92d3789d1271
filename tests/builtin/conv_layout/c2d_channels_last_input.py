# The input arrives channels-last (memory format channels_last, not contiguous in NCHW): the kernel's relayout
# is then a no-op copy, and a transposed conv with groups reads the same layout.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 32, 3, padding=1)
        self.up = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, x):
        return self.up(self.conv(x))


def get_inputs():
    return [torch.randn(2, 32, 6, 7).to(memory_format=torch.channels_last)]


def get_init_inputs():
    return []
