import torch
import torch.nn as nn

m = 33
k = 47
n = 29


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, k) * 0.1)

    def forward(self, a, r):
        return torch.relu(a @ self.weight.t() + r) * 0.5


def get_inputs():
    return [torch.randn(m, k), torch.randn(m, n)]


def get_init_inputs():
    return [k, n]
