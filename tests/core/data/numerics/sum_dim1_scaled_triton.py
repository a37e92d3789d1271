"""A slightly wrong row sum: `sum_dim1_triton.py` with every output 5e-4 too large (relative), a
few times its rounding allowance: a close numerics rejection, which the judge re-examines on eight
sensitivity draws before it stands, and which still stands."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_rows_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):  # element (b, r, c) sits at (b * R + r) * C + c
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + (b * R + rows[:, None]) * C + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(y_ptr + b * C + cols, acc * 1.0005, mask=cols < C)


class ModelNew(nn.Module):
    """The row sum's launch, one program per (batch, 64 columns)."""

    def __init__(self, dim: int):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        src = x.contiguous()
        out = src.new_empty(src.shape[0], src.shape[2])
        sum_rows_kernel[(src.shape[0], triton.cdiv(src.shape[2], 64))](src, out, src.shape[1], src.shape[2],
                                                                        BLOCK_R=64, BLOCK_C=64)
        return out
