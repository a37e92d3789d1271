"""KernelBench level1 96_HuberLoss, sizes scaled down."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.smooth_l1_loss(predictions, targets)


batch_size = 128
input_shape = (512,)


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return []
