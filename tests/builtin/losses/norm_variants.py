"""p-norms over a dim and over everything (p = 1, 3, inf), as vector_norm and the tensor method."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        a = x / torch.norm(x, p=1, dim=-1, keepdim=True)
        b = x.norm(p=float("inf"), dim=1, keepdim=True)
        c = torch.linalg.vector_norm(x, ord=3)
        return a * b + c


def get_inputs():
    return [torch.randn(6, 70)]


def get_init_inputs():
    return []
