import torch
import torch.nn as nn

batch_size = 2
dim1 = 2100  # long middle dim: the looped cols kernel
dim2 = 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
