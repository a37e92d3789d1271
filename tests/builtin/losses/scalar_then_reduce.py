"""A Python number before and after a reduction: the reduction stage reads a tensor, the number stays in the elementwise stages (a pipeline)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, s):
        return (a * s).sum(dim=1) + s


def get_inputs():
    return [torch.randn(7, 33), 0.75]


def get_init_inputs():
    return []
