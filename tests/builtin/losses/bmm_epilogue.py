"""Batched matmuls: torch.bmm with a full-tensor residual and an activation in its epilogue, and the
same contraction written as an einsum."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b, r):
        return torch.relu(torch.bmm(a, b) + r) + torch.einsum("bij,bjk->bik", a, b)


def get_inputs():
    return [torch.randn(3, 20, 36), torch.randn(3, 36, 24), torch.randn(3, 20, 24)]


def get_init_inputs():
    return []
