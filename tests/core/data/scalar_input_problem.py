"""A problem with a 0-d tensor input (a scale passed as a tensor scalar)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s):
        return x * s


def get_inputs():
    return [torch.rand(1000), torch.tensor(3.0)]


def get_init_inputs():
    return []
