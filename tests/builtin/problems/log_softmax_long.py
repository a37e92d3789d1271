import torch
import torch.nn as nn

batch_size = 2
dim = 17000  # past the one-pass limit: the looped kernel


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return nn.functional.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
