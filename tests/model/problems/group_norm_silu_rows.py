import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Few long rows (1 sample x 2 groups of 10240): the one-launch row kernel, two chunks on CPU."""

    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 4, eps=1e-6)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.silu(self.norm(x))

def get_inputs():
    return [torch.randn(1, 4, 64, 80) * 2 + 3]

def get_init_inputs():
    return []
