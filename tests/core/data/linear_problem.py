"""Tiny problem with weights: a 17 -> 9 linear layer on 5 rows."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.rand(5, 17)]


def get_init_inputs():
    return [17, 9]
