"""Correct Triton candidate for scalar_input_problem.py: the 0-d scale is read by the kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, s_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * tl.load(s_ptr), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 256),)](x, s, out, x.numel(), BLOCK=256)
        return out
