import torch
import torch.nn as nn

m = 70
k = 65
n = 130


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
