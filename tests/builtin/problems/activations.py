import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 7
dim = 129


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.LeakyReLU(0.2)
        self.elu = nn.ELU(alpha=0.7)

    def forward(self, x):
        a = self.act(x) + F.gelu(x, approximate="tanh") + F.hardswish(x) + F.softplus(x, beta=2.0)
        b = self.elu(x) + F.mish(x) + F.hardtanh(x, -0.3, 0.4) + F.selu(x) + torch.relu(x) ** 2
        return a * b + F.softsign(x) - torch.exp(-x.abs()) + torch.clamp(x, min=0.1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
