"""Wrong beyond 8192 elements: a single program, so larger inputs are only partly written.
Passes the 37 x 129 problem (4773 elements); a larger stress case breaks it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, 2.0 * tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.zeros_like(x)
        relu2_kernel[(1,)](x, y, x.numel(), BLOCK=8192)
        return y
