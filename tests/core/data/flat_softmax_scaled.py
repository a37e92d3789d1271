"""A 'softmax' that returns x * 2e-5: input-dependent (so no output repeats) and within atol of
every element of flat_softmax_problem.py's output, yet wrong as a whole."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2e-5, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        scaled_kernel[(triton.cdiv(out.numel(), 8192),)](x, out, out.numel(), BLOCK=8192)
        return out
