import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.w0 = nn.Parameter(w)
        self.w1 = nn.Parameter(b)

    def forward(self, x, r):
        return F.group_norm(x, 2, self.w1, self.w0, 1e-6) + r

def get_inputs():
    return [torch.randn(1, 8, 50, 50) + 5, torch.randn(1, 8, 50, 50)]

def get_init_inputs():
    return [torch.randn(8), torch.randn(8)]
