# A 2-D 1x1 conv with bias: 31 x 33 = 1023 positions, 80 input channels (past the one-tile K: a K
# loop with a tail), 150 output channels (a full and a partial channel block), batch 3.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=1, bias=True)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(3, 80, 31, 33)]


def get_init_inputs():
    return [80, 150]
