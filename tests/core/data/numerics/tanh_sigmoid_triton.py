"""tanh as 2 sigmoid(2x) - 1, the usual Triton idiom (kiln's built-in Coder writes it): its error is
a few ulps of 1.0 whatever x is, so on x0.01 inputs it is ~1e-3 of the output, and still right
(H200, 2026-12-01: KernelBench's 22_Tanh rejected on x0.01 before the unit-scale floor)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        tanh_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
