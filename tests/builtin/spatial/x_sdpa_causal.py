# Causal attention with an explicit scale and a key length unlike the query length's tile.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)


def get_inputs():
    return [torch.randn(2, 3, 19, 16), torch.randn(2, 3, 19, 16), torch.randn(2, 3, 19, 8)]


def get_init_inputs():
    return []
