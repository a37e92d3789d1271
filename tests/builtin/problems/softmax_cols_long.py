import torch
import torch.nn as nn

outer = 8  # enough tiles to fill the interpreter's 4 'SMs': the looped kernel, not the split one
rows = 17001  # reduced over dim 1, past the one-pass limit: the looped (online) kernel, cols layout
cols = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    x = torch.randn(outer, rows, cols) * 4
    x[:, :2000, 1] = float("-inf")
    return [x]


def get_init_inputs():
    return []
