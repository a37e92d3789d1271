"""Builds an extra layer before `fc`, so under the same seed its weights differ from the reference's
unless kiln copies the matching parameters (name `fc.weight`, same shape) across."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.scratch = nn.Linear(3, 3)
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.linear(x, self.fc.weight, self.fc.bias)
