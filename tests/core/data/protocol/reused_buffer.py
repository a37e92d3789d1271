"""Correct, but returns the same preallocated buffer on every call (a Triton kernel fills it): the
first call's output is packed before the second call overwrites it, so its trials pass; output
hygiene then rejects it (a returned output that changes later is `output.lazy`)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = torch.zeros(1023)

    def forward(self, x, y):
        add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, self.out, x.numel(), BLOCK=256)
        return self.out
