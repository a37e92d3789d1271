import torch
import torch.nn as nn

rows = 17001  # reduced over dim 0, past the one-pass limit: the looped (online) kernel, cols layout
cols = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=0)


def get_inputs():
    x = torch.randn(rows, cols) * 4
    x[:2000, 1] = float("-inf")
    return [x]


def get_init_inputs():
    return []
