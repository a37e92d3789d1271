"""Correct Triton candidate for shape_init_problem.py: the bias broadcast over the leading dim."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_kernel(x_ptr, b_ptr, out_ptr, n, nb, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % nb, mask=mask)
    tl.store(out_ptr + offs, x * scale + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, shape, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(*shape))
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_bias_kernel[(triton.cdiv(n, 64),)](x, self.bias, out, n, self.bias.numel(), self.scale, BLOCK=64)
        return out
