import torch
import torch.nn as nn

dim0 = 7
dim1 = 50


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.amax(x.abs(), dim=(0, 1))


def get_inputs():
    return [torch.randn(dim0, dim1)]


def get_init_inputs():
    return []
