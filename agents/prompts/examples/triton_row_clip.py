# kiln few-shot example -- problem: problems/row_clip.py -- lang: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_clip_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, limit, BLOCK: tl.constexpr):
    # One program per row; a row longer than BLOCK is walked in BLOCK-wide chunks, twice: pass 1
    # finds max |x|, pass 2 scales and stores. 3 * n_cols * elem_size bytes per row (two reads, one
    # write): a one-pass version would have to hold the whole row in registers.
    row = tl.program_id(0).to(tl.int64)  # 64-bit row offsets: rows * stride may pass 2^31
    x_row = x_ptr + row * x_row_stride
    peak = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)  # the tail chunk is masked
        peak = tl.maximum(peak, tl.abs(v.to(tl.float32)))
    scale = tl.minimum(limit / tl.max(peak, axis=0), 1.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * y_row_stride + cols, v * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, limit: float):
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()  # the kernel assumes unit stride along a row
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        block = min(triton.next_power_of_2(n_cols), 2048)  # bounded registers, whatever the row length
        row_clip_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), self.limit, BLOCK=block, num_warps=4)
        return y
