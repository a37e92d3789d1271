"""Correct on every device, but its launch depends on the device (as the real model's GEMM kernel did,
run3/12): a CPU run checks only the CPU branch."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, 2.0 * tl.maximum(x, 0.0), mask=mask)


def _block(n: int, on_gpu: bool) -> int:
    return 256 if on_gpu else triton.next_power_of_2(n)  # the interpreter: one program


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = _block(n, x.is_cuda)
        relu2_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
        return y
