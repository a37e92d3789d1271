"""Wrong at a tile boundary: one program per row, BLOCK=128 columns, so column 128 of the
129-column problem is never computed and stays zero. The heat map must mark column 128."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols  # the bug: columns >= BLOCK are never visited
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * cols + offs, 2.0 * tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.zeros_like(x)
        relu2_rows[(x.shape[0],)](x, y, x.shape[1], BLOCK=128)
        return y
