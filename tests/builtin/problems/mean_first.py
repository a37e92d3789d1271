import torch
import torch.nn as nn

dim0 = 40
dim1 = 6
dim2 = 11


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=0)


def get_inputs():
    return [torch.randn(dim0, dim1, dim2)]


def get_init_inputs():
    return []
