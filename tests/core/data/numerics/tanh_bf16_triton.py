"""tanh rounded through bf16 (inputs and result) for an fp32 problem: wrong on every distribution,
the scaled-down ones included (the unit-scale floor must not hide it)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.bfloat16).to(tl.float32)
    y = 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0
    tl.store(y_ptr + offs, y.to(tl.bfloat16).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        tanh_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
