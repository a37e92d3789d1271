import torch
import torch.nn as nn

# KernelBench's 40_LayerNorm in small: few rows, each normalised over several dims (a shape tuple
# in get_init_inputs), too few rows to fill the device: the split-levels kernels.
batch_size = 3
normalized_shape = (4, 64, 200)


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():  # weights that are not ones and zeros, so their indexing is checked
            self.ln.weight.normal_()
            self.ln.bias.normal_()

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, *normalized_shape) * 3 + 1]


def get_init_inputs():
    return [normalized_shape]
